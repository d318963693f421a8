package dev.tickmark.http.agent;

import dev.tickmark.engine.host.Host;
import org.apache.pekko.NotUsed;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.http.javadsl.model.ws.BinaryMessage;
import org.apache.pekko.http.javadsl.model.ws.Message;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.stream.KillSwitches;
import org.apache.pekko.stream.Materializer;
import org.apache.pekko.stream.SharedKillSwitch;
import org.apache.pekko.stream.SinkRef;
import org.apache.pekko.stream.SourceRef;
import org.apache.pekko.stream.javadsl.Flow;
import org.apache.pekko.stream.javadsl.Sink;
import org.apache.pekko.stream.javadsl.Source;
import org.apache.pekko.stream.javadsl.StreamRefs;
import org.apache.pekko.util.ByteString;

/**
 * The byte relay between a renter's {@code /v1/rentals/{id}/connect} socket and the agent's {@code
 * /v1/agent/streams/{id}} socket, which may be on different nodes. The renter's node materializes
 * two stream refs ({@link Host.StreamEnds}); the agent's node, once the agent's socket arrives,
 * joins its socket to them. Stream refs carry demand across nodes, so a slow reader slows the
 * writer at the other end and no buffer grows past the refs' own (32 elements of at most one
 * websocket chunk each). Either socket ending ends the other; a node that dies fails the refs, and
 * the surviving socket closes.
 */
public final class StreamRelay {
  private StreamRelay() {}

  /** The renter's half: its socket's flow, and the ends to hand the agent's node. */
  public record RenterSide(Flow<Message, Message, NotUsed> flow, Host.StreamEnds ends) {}

  /** Materializes the refs now (the agent may dial before the renter's upgrade completes). */
  public static RenterSide renterSide(Materializer materializer) {
    Pair<SourceRef<ByteString>, Sink<ByteString, NotUsed>> toAgent =
        StreamRefs.<ByteString>sourceRef().preMaterialize(materializer);
    Pair<SinkRef<ByteString>, Source<ByteString, NotUsed>> fromAgent =
        StreamRefs.<ByteString>sinkRef().preMaterialize(materializer);
    Host.StreamEnds ends = new Host.StreamEnds(toAgent.first(), fromAgent.first());
    Sink<Message, NotUsed> in =
        Flow.<Message>create()
            .flatMapConcat(StreamRelay::bytes)
            .via(coalesce())
            .to(toAgent.second());
    Source<Message, NotUsed> out = fromAgent.second().map(b -> (Message) BinaryMessage.create(b));
    return new RenterSide(Flow.fromSinkAndSourceCoupled(in, out), ends);
  }

  /**
   * The agent's half: its socket joined to the ends; {@code stop} ends it early (the rental ended),
   * {@code onEnd} runs once the relay is over, whichever side ended it.
   */
  public static Flow<Message, Message, NotUsed> agentSide(
      Host.StreamEnds ends, SharedKillSwitch stop, Runnable onEnd) {
    Sink<Message, NotUsed> in =
        Flow.<Message>create()
            .flatMapConcat(StreamRelay::bytes)
            .via(coalesce())
            .via(stop.flow())
            .to(ends.fromAgent().getSink());
    Source<Message, NotUsed> out =
        ends.toAgent().getSource().via(stop.flow()).map(b -> (Message) BinaryMessage.create(b));
    return Flow.fromSinkAndSourceCoupled(in, out)
        .watchTermination(
            (notUsed, done) -> {
              done.whenComplete((d, failure) -> onEnd.run());
              return NotUsed.getInstance();
            });
  }

  /** At most this many bytes in one element through the refs (Artery's frames are 256 KiB). */
  static final int MAX_ELEMENT = 128 * 1024;

  /**
   * Joins chunks while the other side is busy (and only then: no added latency), so that a bulk
   * copy crosses the refs — and between nodes, the cluster — in fewer, larger messages.
   */
  private static Flow<ByteString, ByteString, NotUsed> coalesce() {
    return Flow.<ByteString>create()
        .batchWeighted(MAX_ELEMENT, b -> (long) b.size(), b -> b, ByteString::concat);
  }

  /**
   * A frame's bytes; the relay carries binary frames only: a text frame fails the relay, which
   * closes both sockets (the rest of that frame is never read).
   */
  private static Source<ByteString, NotUsed> bytes(Message message) {
    if (message.isText())
      return Source.failed(new IllegalArgumentException("SSH streams carry binary frames only"));
    return message
        .asBinaryMessage()
        .getStreamedData()
        .mapMaterializedValue(m -> NotUsed.getInstance());
  }

  // ---- the handle a session holds to close a stream socket on another node

  /** Stops the stream when told, and itself once the stream is over (its watchers learn). */
  static Behavior<Host.StreamControl> handle(SharedKillSwitch stop) {
    return Behaviors.receive(Host.StreamControl.class)
        .onMessage(
            Host.ShutDownStream.class,
            m -> {
              stop.shutdown();
              return Behaviors.same();
            })
        .onMessage(Ended.class, m -> Behaviors.stopped())
        .build();
  }

  /** The relay is over (local only, never crosses a node). */
  enum Ended implements Host.StreamControl {
    INSTANCE
  }

  static SharedKillSwitch killSwitch(String streamId) {
    return KillSwitches.shared("ssh-stream-" + streamId);
  }

  static void tellEnded(ActorRef<Host.StreamControl> handle) {
    handle.tell(Ended.INSTANCE);
  }
}
