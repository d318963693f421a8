package dev.tickmark.http.agent;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.host.Host;
import dev.tickmark.http.Ids;
import dev.tickmark.http.Problem;
import dev.tickmark.persistence.logs.RentalLogs;
import java.net.InetAddress;
import java.time.Duration;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.NotUsed;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.http.javadsl.model.AttributeKeys;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.RemoteAddress;
import org.apache.pekko.http.javadsl.model.headers.RetryAfter;
import org.apache.pekko.http.javadsl.model.ws.Message;
import org.apache.pekko.http.javadsl.model.ws.TextMessage;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.japi.Pair;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.stream.Materializer;
import org.apache.pekko.stream.OverflowStrategy;
import org.apache.pekko.stream.SharedKillSwitch;
import org.apache.pekko.stream.javadsl.Flow;
import org.apache.pekko.stream.javadsl.Sink;
import org.apache.pekko.stream.javadsl.Source;
import org.apache.pekko.stream.typed.javadsl.ActorSink;
import org.apache.pekko.stream.typed.javadsl.ActorSource;

/**
 * {@code GET /v1/agent/connect}: authenticates the upgrade, then hands the socket to an {@link
 * AgentSession}. A token or credential of the wrong shape is refused (401) without asking any
 * entity; an unknown one gets no socket either (401). A real secret whose use is over (a spent or
 * expired token, a removed host) gets a socket that says why in an error frame. Failed attempts are
 * throttled per client address ({@link FailedAuthThrottle}: 429 {@code rate_limited}).
 */
public final class AgentSocket {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  public static final java.util.List<dev.tickmark.http.Operation> OPERATIONS =
      java.util.List.of(
          dev.tickmark.http.Operation.get("/v1/agent/connect"),
          dev.tickmark.http.Operation.get("/v1/agent/streams/{stream_id}"));

  public static final String TOKEN_PREFIX = "tmkreg_";
  public static final String CREDENTIAL_PREFIX = "tmkhost_";
  static final String HOST_ID_PREFIX = "host_";

  /** A token's or credential's secret: 24 random bytes in lower-case hex. */
  static final int SECRET_HEX_DIGITS = 48;

  private final ActorSystem<?> system;
  private final ClusterSharding sharding;
  private final AgentSession.Limits limits;
  private final Materializer materializer;
  private final RentalLogs logs;
  private final FailedAuthThrottle throttle;

  public AgentSocket(
      ActorSystem<?> system,
      AgentSession.Limits limits,
      FailedAuthThrottle.Settings failedAuthThrottle,
      RentalLogs logs) {
    this.system = system;
    this.logs = logs;
    this.throttle = new FailedAuthThrottle(failedAuthThrottle);
    this.sharding = ClusterSharding.get(system);
    this.limits = limits;
    this.materializer = Materializer.matFromSystem(system);
  }

  public Route route() {
    return concat(
        path(
            segment("agent").slash("connect"),
            () ->
                get(
                    () ->
                        extractRequest(
                            request -> connect(request, throttle.tryAcquire(client(request)))))),
        path(
            segment("agent")
                .slash("streams")
                .slash(org.apache.pekko.http.javadsl.server.PathMatchers.segment()),
            streamId ->
                get(
                    () ->
                        extractRequest(
                            request ->
                                stream(request, streamId, throttle.tryAcquire(client(request)))))));
  }

  /**
   * {@code GET /v1/agent/streams/{stream_id}}: the agent's half of one SSH stream, asked for in an
   * {@code open_stream} frame. Host credential only; the stream must be one its session is waiting
   * for (404 otherwise). Binary frames both ways, relayed to the renter's socket ({@link
   * StreamRelay}).
   */
  private Route stream(HttpRequest request, String streamId, FailedAuthThrottle.Attempt attempt) {
    if (!attempt.allowed()) return rateLimited(attempt);
    Optional<String[]> parsed =
        request
            .getHeader("Authorization")
            .map(h -> h.value())
            .flatMap(AgentSocket::parse)
            .filter(token -> token[0].equals(CREDENTIAL_PREFIX));
    if (parsed.isEmpty())
      return complete(
          Problem.unauthorized("send Authorization: Bearer <host credential>").toResponse());
    if (!Ids.wellFormed(STREAM_ID_PREFIX, streamId))
      return complete(Problem.notFound("no such stream").toResponse());
    if (request.getAttribute(AttributeKeys.webSocketUpgrade).isEmpty())
      return complete(
          Problem.badRequest("websocket_required", "this is a websocket: send an upgrade request")
              .toResponse());
    String hostId = parsed.get()[1];
    SharedKillSwitch stop = StreamRelay.killSwitch(streamId);
    CompletionStage<Route> route =
        authenticate(parsed.get())
            .thenCompose(
                credentials -> {
                  if (!(credentials instanceof AgentSession.HostCredential))
                    return CompletableFuture.completedFuture(
                        complete(
                            Problem.unauthorized("the host credential is not valid").toResponse()));
                  attempt.refund();
                  ActorRef<Host.StreamControl> handle =
                      system.systemActorOf(
                          StreamRelay.handle(stop), "ssh-stream-" + streamId, Props.empty());
                  return sharding
                      .entityRefFor(Host.ENTITY_KEY, hostId)
                      .<Host.StreamEnds>askWithStatus(
                          reply -> new Host.ClaimStream(streamId, handle, reply),
                          limits.askTimeout())
                      .<Route>thenApply(
                          ends ->
                              handleWebSocketMessages(
                                  StreamRelay.agentSide(
                                      ends, stop, () -> StreamRelay.tellEnded(handle))))
                      .whenComplete(
                          (r, failure) -> {
                            if (failure != null) StreamRelay.tellEnded(handle);
                          });
                });
    return onSuccess(route, r -> r);
  }

  /**
   * Runs {@code inner} with the id of the host whose credential ({@code Authorization: Bearer
   * tmkhost_<host>_<secret>}) the request carries, authenticated as the agent's stream websocket
   * is: throttled per client address (429), a missing or ill-shaped credential refused without
   * asking any entity (401), then the host's entity asked (401 when it does not know the secret).
   * For the agent's plain HTTP calls (snapshot transfers).
   */
  public Route hostCredential(java.util.function.Function<String, Route> inner) {
    return extractRequest(
        request -> {
          FailedAuthThrottle.Attempt attempt = throttle.tryAcquire(client(request));
          if (!attempt.allowed()) return rateLimited(attempt);
          Optional<String[]> parsed =
              request
                  .getHeader("Authorization")
                  .map(h -> h.value())
                  .flatMap(AgentSocket::parse)
                  .filter(token -> token[0].equals(CREDENTIAL_PREFIX));
          if (parsed.isEmpty())
            return complete(
                Problem.unauthorized("send Authorization: Bearer <host credential>").toResponse());
          CompletionStage<AgentSession.Credentials> authenticated =
              authenticate(parsed.get())
                  .whenComplete(
                      (credentials, failure) -> {
                        // the engine not answering is no failed attempt of this address
                        if (failure != null || credentials instanceof AgentSession.HostCredential)
                          attempt.refund();
                      });
          return onSuccess(
              authenticated,
              credentials ->
                  credentials instanceof AgentSession.HostCredential host
                      ? inner.apply(host.hostId())
                      : complete(
                          Problem.unauthorized("the host credential is not valid").toResponse()));
        });
  }

  /** Stream ids: this prefix and 24 hex digits, made by the renter's node. */
  public static final String STREAM_ID_PREFIX = "str_";

  /**
   * Refuses an address that failed too often (429), then a token or credential of the wrong shape
   * (401, no entity asked), then asks the host's entity. Only an attempt that authenticates (or
   * that the engine could not answer) gives its token back to the address's bucket.
   */
  private Route connect(HttpRequest request, FailedAuthThrottle.Attempt attempt) {
    if (!attempt.allowed()) return rateLimited(attempt);
    Optional<String[]> parsed =
        request.getHeader("Authorization").map(h -> h.value()).flatMap(AgentSocket::parse);
    if (parsed.isEmpty()) {
      return complete(
          Problem.unauthorized("send Authorization: Bearer <registration token or host credential>")
              .toResponse());
    }
    CompletionStage<AgentSession.Credentials> authenticated =
        authenticate(parsed.get())
            .whenComplete(
                (credentials, failure) -> {
                  if (failure != null
                      || credentials instanceof AgentSession.RegistrationToken
                      || credentials instanceof AgentSession.HostCredential) attempt.refund();
                });
    return onSuccess(
        authenticated,
        credentials -> {
          if (credentials == null)
            return complete(
                Problem.unauthorized("the token or credential is not valid").toResponse());
          return handleWebSocketMessages(flow(credentials));
        });
  }

  /** 429 for an address that failed to authenticate too often, with when to try again. */
  private static Route rateLimited(FailedAuthThrottle.Attempt attempt) {
    return complete(
        new Problem(
                429,
                "rate_limited",
                "too many failed agent authentications from this address; retry in "
                    + attempt.retryAfterSeconds()
                    + " s")
            .toResponse()
            .addHeader(RetryAfter.create(attempt.retryAfterSeconds())));
  }

  /**
   * The TCP peer's address (the {@code remote-address-attribute}), never a header a client could
   * forge; behind a proxy that is the proxy's.
   */
  private static InetAddress client(HttpRequest request) {
    return request
        .getAttribute(AttributeKeys.remoteAddress)
        .flatMap(RemoteAddress::getAddress)
        .orElse(UNKNOWN_CLIENT);
  }

  private static final InetAddress UNKNOWN_CLIENT = InetAddress.getLoopbackAddress();

  private static org.apache.pekko.http.javadsl.server.PathMatcher0 segment(String s) {
    return org.apache.pekko.http.javadsl.server.PathMatchers.segment(s);
  }

  /**
   * {@code [kind, hostId, secret]} from {@code Bearer tmkreg_<host>_<secret>} or {@code Bearer
   * tmkhost_<host>_<secret>}.
   */
  static Optional<String[]> parse(String header) {
    if (!header.regionMatches(true, 0, "Bearer ", 0, 7)) return Optional.empty();
    String token = header.substring(7).trim();
    String kind =
        token.startsWith(TOKEN_PREFIX)
            ? TOKEN_PREFIX
            : token.startsWith(CREDENTIAL_PREFIX) ? CREDENTIAL_PREFIX : null;
    if (kind == null || token.length() > 200) return Optional.empty();
    String rest = token.substring(kind.length());
    int split = rest.lastIndexOf('_');
    if (split <= 0 || split == rest.length() - 1) return Optional.empty();
    String hostId = rest.substring(0, split);
    String secret = rest.substring(split + 1);
    // The shapes the engine hands out (HostRoutes' token, Host's credential): anything else is
    // no secret of ours, and must not wake an entity.
    if (!Ids.wellFormed(HOST_ID_PREFIX, hostId) || !lowerHex(secret, SECRET_HEX_DIGITS))
      return Optional.empty();
    return Optional.of(new String[] {kind, hostId, secret});
  }

  private static boolean lowerHex(String s, int length) {
    if (s.length() != length) return false;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
  }

  /**
   * How long one question to the host's entity may take at the upgrade. A question sent while the
   * host's shard is still homed on a lost node is never answered; asked again once the shard has
   * moved, it is answered at once. So the ask timeout is split into attempts this long, and an
   * agent reconnecting after a node loss is let in about a second after its host's entity moved
   * instead of at its own next reconnect (FailoverBenchmark, docs/benchmarks.md "Shard leases").
   */
  static final Duration AUTHENTICATE_ATTEMPT_TIMEOUT = Duration.ofSeconds(1);

  private CompletionStage<AgentSession.Credentials> authenticate(String[] token) {
    String hostId = token[1];
    String secretHash = Host.sha256(token[2]);
    var host = sharding.entityRefFor(Host.ENTITY_KEY, hostId);
    Duration attempt =
        limits.askTimeout().compareTo(AUTHENTICATE_ATTEMPT_TIMEOUT) < 0
            ? limits.askTimeout()
            : AUTHENTICATE_ATTEMPT_TIMEOUT;
    int attempts = (int) Math.max(1, limits.askTimeout().toMillis() / attempt.toMillis());
    if (token[0].equals(TOKEN_PREFIX)) {
      return askAgainOnTimeout(
              () ->
                  host.<org.apache.pekko.Done>askWithStatus(
                      reply -> new Host.CheckToken(secretHash, reply), attempt),
              attempts)
          .<AgentSession.Credentials>thenApply(
              done -> new AgentSession.RegistrationToken(hostId, secretHash))
          .exceptionally(AgentSocket::refusalOrNull);
    }
    return askAgainOnTimeout(
            () ->
                host.<Host.Identity>askWithStatus(
                    reply -> new Host.Authenticate(secretHash, reply), attempt),
            attempts)
        .<AgentSession.Credentials>thenApply(
            identity -> new AgentSession.HostCredential(hostId, identity.publicKey()))
        .exceptionally(AgentSocket::refusalOrNull);
  }

  /**
   * Asks again, up to {@code attempts} questions in all, while a question gets no answer in time;
   * an answer, a refusal included, ends it. Only for questions that change nothing.
   */
  static <T> CompletionStage<T> askAgainOnTimeout(
      java.util.function.Supplier<CompletionStage<T>> ask, int attempts) {
    return ask.get()
        .handle(
            (answer, failure) -> {
              if (failure == null) return CompletableFuture.completedStage(answer);
              Throwable cause =
                  failure instanceof java.util.concurrent.CompletionException
                          && failure.getCause() != null
                      ? failure.getCause()
                      : failure;
              if (cause instanceof java.util.concurrent.TimeoutException && attempts > 1)
                return askAgainOnTimeout(ask, attempts - 1);
              return CompletableFuture.<T>failedStage(failure);
            })
        .thenCompose(stage -> stage);
  }

  /**
   * Unknown secrets get no socket ({@code null}); spent ones get a socket that explains. Timeouts
   * fail the request (503).
   */
  private static AgentSession.Credentials refusalOrNull(Throwable failure) {
    Throwable t =
        failure instanceof java.util.concurrent.CompletionException && failure.getCause() != null
            ? failure.getCause()
            : failure;
    if (t instanceof StatusReply.ErrorMessage e) {
      Rejection code = Rejection.codeOf(e.getMessage());
      if (code == Rejection.TOKEN_USED
          || code == Rejection.TOKEN_EXPIRED
          || code == Rejection.HOST_REMOVED) {
        return new AgentSession.Refused(code.wire(), Rejection.detailOf(e.getMessage()));
      }
      return null;
    }
    throw new java.util.concurrent.CompletionException(t);
  }

  private Flow<Message, Message, NotUsed> flow(AgentSession.Credentials credentials) {
    Pair<ActorRef<AgentSession.Outgoing>, Source<AgentSession.Outgoing, NotUsed>> outgoing =
        ActorSource.<AgentSession.Outgoing>actorRef(
                m -> m == AgentSession.Complete.INSTANCE,
                m -> Optional.empty(),
                64,
                OverflowStrategy.fail())
            .preMaterialize(materializer);
    ActorRef<AgentSession.Msg> session =
        system.systemActorOf(
            AgentSession.create(outgoing.first(), credentials, limits, logs),
            "agent-session-" + UUID.randomUUID(),
            Props.empty());

    Sink<Message, NotUsed> in =
        Flow.<Message>create()
            .mapAsync(1, this::toSessionMessage)
            .to(
                ActorSink.actorRef(
                    session,
                    AgentSession.StreamCompleted.INSTANCE,
                    AgentSession.StreamFailed::new));
    Source<Message, NotUsed> out =
        outgoing
            .second()
            .filter(m -> m instanceof AgentSession.Text)
            .map(m -> (Message) TextMessage.create(((AgentSession.Text) m).text()));
    return Flow.fromSinkAndSourceCoupled(in, out);
  }

  private static long nowMicros() {
    return Host.micros(java.time.Instant.now());
  }

  private CompletionStage<AgentSession.Msg> toSessionMessage(Message message) {
    if (!message.isText()) {
      message.asBinaryMessage().getStreamedData().runWith(Sink.ignore(), materializer);
      return CompletableFuture.completedFuture(
          new AgentSession.InboundRejected("malformed_frame", "frames are JSON text, not binary"));
    }
    TextMessage text = message.asTextMessage();
    int max = limits.maxFrameChars();
    if (text.isStrict()) {
      String s = text.getStrictText();
      return CompletableFuture.completedFuture(
          s.length() > max
              ? new AgentSession.InboundRejected(
                  "frame_too_large", "frames are at most " + max + " characters")
              : new AgentSession.Inbound(s, nowMicros()));
    }
    // A streamed (fragmented or large) message is read to its end, but kept only up to the limit;
    // past it the session hears at once and closes the socket. Cancelling the message's stream
    // instead would end the websocket's whole inbound side (Pekko HTTP's splitAfter propagates a
    // substream cancel), and failing it (limitWeighted) fails the socket with 1011: either way the
    // agent never got its error frame.
    CompletableFuture<AgentSession.Msg> result = new CompletableFuture<>();
    StringBuilder sb = new StringBuilder();
    text.getStreamedText()
        .runWith(
            Sink.foreach(
                chunk -> {
                  if (result.isDone()) return; // over the limit: drain the rest of the frame
                  if (sb.length() + chunk.length() > max) {
                    result.complete(
                        new AgentSession.InboundRejected(
                            "frame_too_large", "frames are at most " + max + " characters"));
                  } else {
                    sb.append(chunk);
                  }
                }),
            materializer)
        .whenComplete(
            (done, failure) ->
                result.complete(
                    failure == null
                        ? new AgentSession.Inbound(sb.toString(), nowMicros())
                        : new AgentSession.InboundRejected(
                            "malformed_frame", "the frame could not be read")));
    return result;
  }
}
