package dev.tickmark.agent.ssh;

import java.net.URI;
import java.net.http.HttpClient;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The agent's SSH streams ({@code open_stream} / {@code close_stream}): each one is a {@link
 * StreamJoiner} between the engine's websocket {@code <engine>/v1/agent/streams/<stream_id>} (the
 * host credential as bearer) and the agent's {@link AgentSshServer}. At most {@link
 * #MAX_PER_RENTAL} per rental; every stream of a rental closes when it ends. Thread-safe.
 *
 * <p>{@code close_stream} reasons the agent sends: {@code rental_not_running}, {@code
 * too_many_streams}, {@code invalid_stream_id}, {@code ssh_unavailable}, {@code ssh_closed} (the
 * SSH session ended), {@code rental_ended}, {@code agent_stopping}, {@code stream_failed: …}.
 */
public final class SshStreams implements AutoCloseable {
  public static final int MAX_PER_RENTAL = 8;
  public static final String STREAMS_PATH = "/v1/agent/streams/";
  static final Pattern STREAM_ID = Pattern.compile("[A-Za-z0-9_-]{1,128}");

  private static final Logger log = LoggerFactory.getLogger(SshStreams.class);

  /** Where the agent's {@code close_stream} frames go (the control websocket, when connected). */
  public interface Control {
    void closeStream(String streamId, String reason);
  }

  private final AgentSshServer server;
  private final HttpClient http;
  private final Control control;
  private final ExecutorService threads;
  private final Map<String, StreamJoiner> streams = new ConcurrentHashMap<>();
  private boolean closed; // guarded by this

  public SshStreams(AgentSshServer server, HttpClient http, Control control) {
    this.server = server;
    this.http = http;
    this.control = control;
    this.threads =
        Executors.newCachedThreadPool(
            r -> {
              Thread t = new Thread(r, "tickmark-agent-ssh-stream");
              t.setDaemon(true);
              return t;
            });
    server.registry().onEnded(this::rentalEnded);
  }

  /**
   * {@code open_stream}: joins the stream to the SSH server, or answers {@code close_stream} when
   * it cannot. {@code engine}: the base address of the engine the control websocket is connected to
   * ({@code ws://host:port[/base]}). A stream id already open is ignored (a repeated frame).
   */
  public void open(String streamId, String rentalId, URI engine, String bearer) {
    if (streamId == null || !STREAM_ID.matcher(streamId).matches()) {
      log.warn("open_stream with an invalid stream id: refused");
      if (streamId != null) control.closeStream(streamId, "invalid_stream_id");
      return;
    }
    StreamJoiner joiner;
    synchronized (this) {
      if (streams.containsKey(streamId)) return;
      String refusal = null;
      if (closed) refusal = "agent_stopping";
      else if (!server.registry().isRunning(rentalId)) refusal = "rental_not_running";
      else if (count(rentalId) >= MAX_PER_RENTAL) refusal = "too_many_streams";
      if (refusal != null) {
        log.info("stream {} (rental {}) refused: {}", streamId, rentalId, refusal);
        control.closeStream(streamId, refusal);
        return;
      }
      joiner =
          new StreamJoiner(
              streamId,
              rentalId,
              server.registry(),
              threads,
              (reason, tell) -> {
                streams.remove(streamId);
                if (tell) control.closeStream(streamId, reason);
              });
      streams.put(streamId, joiner);
    }
    URI uri = URI.create(engine + STREAMS_PATH + streamId);
    log.info("stream {} (rental {}): opening", streamId, rentalId);
    threads.execute(() -> joiner.start(server.address(), http, uri, bearer));
  }

  /** {@code close_stream} from the engine: ends the stream if it is open. */
  public void close(String streamId, String reason) {
    StreamJoiner j = streamId == null ? null : streams.get(streamId);
    if (j != null) j.finish("closed by the engine" + (reason == null ? "" : ": " + reason), false);
  }

  /** The streams of a rental open now. */
  public int count(String rentalId) {
    int n = 0;
    for (StreamJoiner j : streams.values()) if (j.rentalId.equals(rentalId)) n++;
    return n;
  }

  private void rentalEnded(String rentalId) {
    for (StreamJoiner j : new ArrayList<>(streams.values()))
      if (j.rentalId.equals(rentalId)) j.finish("rental_ended", true);
  }

  /** Ends every stream (the agent stops). */
  @Override
  public void close() {
    List<StreamJoiner> all;
    synchronized (this) {
      closed = true;
      all = new ArrayList<>(streams.values());
    }
    for (StreamJoiner j : all) j.finish("agent_stopping", true);
    threads.shutdown();
  }
}
