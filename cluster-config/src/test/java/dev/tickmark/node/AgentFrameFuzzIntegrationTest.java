package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.tickmark.node.ApiClient.Customer;
import dev.tickmark.node.HostTestSupport.Registered;
import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import java.net.http.WebSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.AfterProperty;
import net.jqwik.api.lifecycle.BeforeContainer;

/**
 * Property-based fuzzing of the agent websocket on a real node: one hostile frame per session —
 * text that is no JSON, JSON that is no frame, unknown or engine-only types, known agent frames
 * with a field of the wrong type or one too many, binary, oversized (whole or in fragments) and
 * deeply nested frames — before the hello or after the welcome.
 *
 * <p>Properties: the fuzzed session gets {@code error {code, message}} with one of the frame codes
 * of docs/agent-protocol.md ("Limits") and is then closed with 1000; the node answers {@code
 * /health}; a well-behaved host, heartbeating every 500 ms on its own session all along, keeps that
 * session open and stays online with its heartbeats landing.
 *
 * <p>Tries: {@code jqwik.tries.default} (junit-platform.properties); raise it with {@code
 * -Djqwik.tries.default=5000} (docs/security.md).
 */
class AgentFrameFuzzIntegrationTest {
  /** What a session that sent a bad frame is told (never the hello timeout's unauthorized). */
  static final Set<String> FRAME_CODES =
      Set.of(
          "malformed_frame",
          "frame_too_large",
          "unexpected_frame",
          "bad_signature",
          "key_mismatch",
          "not_found",
          "rate_limited");

  static Node node;
  static ApiClient api;
  static Customer provider;
  static Registered good;
  static Registered target;
  static int tried;

  @BeforeContainer
  static void start() throws Exception {
    // every session authenticates with a valid credential; the throttle is opened anyway, as in
    // AgentSocketAbuseIntegrationTest, so nothing here depends on its budget
    node =
        HostTestSupport.startNode(
            "agent_fuzz",
            Map.of(
                "tickmark.agent-socket.failed-auth.per-second", 1_000_000,
                "tickmark.agent-socket.failed-auth.burst", 1_000_000));
    api = new ApiClient(node.baseUrl());
    provider = api.signUp("fuzz-provider");
    good = HostTestSupport.verifiedHost(node, api, provider, "eu-nl");
    target = HostTestSupport.register(node, api, provider, "eu-de");
    target.agent().close();
  }

  @AfterContainer
  static void stop() throws Exception {
    if (good != null) good.agent().close();
    if (node != null) node.close();
  }

  /** One hostile frame, sent before the hello or after the welcome. */
  record Hostile(boolean afterWelcome, Kind kind, String text, byte[] binary, int fragment) {
    @Override
    public String toString() {
      String shown =
          binary != null
              ? "binary(" + binary.length + ")"
              : text.length() > 300 ? text.substring(0, 300) + "…(" + text.length() + ")" : text;
      return (afterWelcome ? "after welcome: " : "before hello: ")
          + kind
          + (fragment > 0 ? " in fragments of " + fragment : "")
          + " "
          + shown;
    }
  }

  enum Kind {
    NOT_JSON,
    NOT_A_FRAME,
    UNKNOWN_TYPE,
    ENGINE_FRAME,
    WRONG_FIELD_TYPE,
    EXTRA_FIELD,
    AGENT_FRAME_BEFORE_HELLO,
    BINARY,
    OVERSIZED,
    DEEP
  }

  @Property
  void aHostileFrameClosesItsSessionOnly(@ForAll("hostile") Hostile frame) {
    try (AgentTestClient agent = AgentTestClient.connect(node, target.credential(), target.key())) {
      if (frame.afterWelcome()) agent.handshake();
      else agent.expect("challenge");
      boolean sent =
          frame.binary() != null
              ? agent.sendBinary(frame.binary())
              : frame.fragment() > 0
                  ? agent.sendTextInFragments(frame.text(), frame.fragment())
                  : agent.sendText(frame.text());
      JsonNode error = null;
      for (JsonNode next = agent.next(); error == null; next = error == null ? agent.next() : next)
        if (next.path("type").asText().equals("error")) error = next;
      String code = error.path("code").asText();
      assertTrue(FRAME_CODES.contains(code), "error " + error + " for " + frame + " sent " + sent);
      assertFalse(error.path("message").asText("").isEmpty(), "an error says why: " + error);
      AgentTestClient.Closed closed = agent.awaitClose();
      assertEquals(WebSocket.NORMAL_CLOSURE, closed.status(), "closed " + closed + " for " + frame);
    }
    api.get("/health", null).expect(200);
    assertFalse(
        good.agent().isClosed(),
        "the well-behaved session was closed: " + good.agent().closed().getNow(null));
    if (++tried % 40 == 0) goodHostOnline();
  }

  /** The well-behaved host is online and its heartbeats still land. */
  @AfterProperty
  void goodHostOnline() {
    Instant before =
        Instant.parse(
            HostTestSupport.host(api, provider, good.hostId()).get("last_heartbeat_at").asText());
    Eventually.eventually(
        Duration.ofSeconds(5),
        () -> {
          JsonNode host = HostTestSupport.host(api, provider, good.hostId());
          assertTrue(host.get("online").asBoolean(), host.toString());
          assertTrue(
              Instant.parse(host.get("last_heartbeat_at").asText()).isAfter(before),
              "heartbeats still land: " + host);
        });
    assertFalse(good.agent().isClosed(), "the well-behaved session was closed");
  }

  // ---- generators -------------------------------------------------------------------------------

  @Provide
  Arbitrary<Hostile> hostile() {
    return net.jqwik.api.Combinators.combine(Arbitraries.of(Kind.values()), Arbitraries.longs())
        .as((kind, seed) -> frame(kind, new Random(seed)));
  }

  /** The agent's frames as JSON trees: what the hostile ones are made from. */
  static List<ObjectNode> agentFrames() {
    String at = Instant.now().toString();
    List<AgentFrame> frames =
        List.of(
            new AgentFrame.Hello("AAAA", "test", Ed25519.encodePublic(target.key().getPublic())),
            new AgentFrame.Heartbeat(
                1,
                at,
                List.of(new AgentFrame.GpuSample(0, 10, 40, null)),
                List.of("rnt_00000000000000000000dead")),
            new AgentFrame.HardwareReportFrame(
                Frames.reportTree(AgentTestClient.simulatedReport()), "AAAA"),
            new AgentFrame.RentalStarted("rnt_00000000000000000000dead", at),
            new AgentFrame.RentalFailed("rnt_00000000000000000000dead", "oops"),
            new AgentFrame.RentalStopped("rnt_00000000000000000000dead", at, false),
            new AgentFrame.Logs(
                "rnt_00000000000000000000dead",
                List.of(new AgentFrame.LogLine(1, at, "stdout", "hi"))),
            new AgentFrame.CloseStream("str_00000000000000000000dead", "ssh_closed"));
    List<ObjectNode> trees = new ArrayList<>();
    for (AgentFrame f : frames) trees.add((ObjectNode) read(Frames.write(f)));
    return trees;
  }

  static List<String> engineFrames() {
    return List.of(
        Frames.write(new AgentFrame.Challenge("AAAA")),
        Frames.write(new AgentFrame.Welcome("host_00000000000000000000dead", "x", 1)),
        Frames.write(new AgentFrame.StopRental("rnt_00000000000000000000dead", true)),
        Frames.write(
            new AgentFrame.Preempt("rnt_00000000000000000000dead", "2030-01-01T00:00:00Z")),
        Frames.write(new AgentFrame.MeasureAgain("because")),
        Frames.write(new AgentFrame.LogsAck("rnt_00000000000000000000dead", 5)),
        Frames.write(new AgentFrame.Error("replaced", "go away")),
        Frames.write(new AgentFrame.OpenStream("str_00000000000000000000dead", "rnt_x")));
  }

  static JsonNode read(String text) {
    try {
      return ApiClient.JSON.readTree(text);
    } catch (java.io.IOException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * Hostile text without lone surrogates: the JDK client cannot send those (a websocket text frame
   * is UTF-8), so they would never reach the node.
   */
  static String text(Random random, int length) {
    return HttpFuzzIntegrationTest.randomText(random, length).replace("\ud800", "\ufffe");
  }

  static JsonNode json(Random random, int depth) {
    return read(HttpFuzzIntegrationTest.randomJson(random, depth).toString().replace("\ud800", ""));
  }

  static Hostile frame(Kind kind, Random random) {
    boolean afterWelcome = random.nextBoolean();
    JsonNodeFactory f = JsonNodeFactory.instance;
    List<ObjectNode> agent = agentFrames();
    // after the welcome a hello is itself unexpected; before it every frame but a hello is
    ObjectNode template = agent.get(afterWelcome ? 1 + random.nextInt(agent.size() - 1) : 0);
    return switch (kind) {
      case NOT_JSON -> {
        String[] texts = {
          "", " ", "{", "}", "hello", "{\"type\":", "\"heartbeat\"", "nul", "{'type':'heartbeat'}"
        };
        String t = texts[random.nextInt(texts.length)] + text(random, random.nextInt(20));
        yield new Hostile(afterWelcome, kind, t.isEmpty() ? "{" : t, null, 0);
      }
      case NOT_A_FRAME -> {
        JsonNode v = json(random, 3);
        if (v.isObject()) ((ObjectNode) v).remove("type");
        yield new Hostile(afterWelcome, kind, v.toString(), null, 0);
      }
      case UNKNOWN_TYPE -> {
        ObjectNode o = template.deepCopy();
        JsonNode[] types = {
          f.textNode("launch_missiles"), f.textNode("HEARTBEAT"), f.textNode(""),
              f.textNode("heartbeat\u0000"),
          f.numberNode(1), f.nullNode(), f.arrayNode().add("heartbeat"), f.objectNode(),
          f.textNode(text(random, 1 + random.nextInt(30)))
        };
        o.set("type", types[random.nextInt(types.length)]);
        yield new Hostile(afterWelcome, kind, o.toString(), null, 0);
      }
      case ENGINE_FRAME -> {
        List<String> engine = engineFrames();
        yield new Hostile(afterWelcome, kind, engine.get(random.nextInt(engine.size())), null, 0);
      }
      case WRONG_FIELD_TYPE -> {
        ObjectNode o = template.deepCopy();
        List<String> fields = new ArrayList<>();
        for (Iterator<String> it = o.fieldNames(); it.hasNext(); ) {
          String name = it.next();
          if (!name.equals("type")) fields.add(name);
        }
        String field = fields.get(random.nextInt(fields.size()));
        JsonNode old = o.get(field);
        // a value no lenient reading turns into the field's type
        JsonNode wrong =
            old.isArray()
                ? (random.nextBoolean() ? f.textNode("x") : f.numberNode(1e300))
                : old.isObject()
                    ? f.arrayNode().add(1)
                    : random.nextBoolean()
                        ? f.objectNode().put("$gt", "")
                        : f.arrayNode().add(old).add(old);
        o.set(field, wrong);
        yield new Hostile(afterWelcome, kind, o.toString(), null, 0);
      }
      case EXTRA_FIELD -> {
        ObjectNode o = template.deepCopy();
        o.set(
            random.nextBoolean() ? "evil" : text(random, 1 + random.nextInt(10)) + "_x",
            json(random, 2));
        yield new Hostile(afterWelcome, kind, o.toString(), null, 0);
      }
      case AGENT_FRAME_BEFORE_HELLO -> {
        ObjectNode o = agent.get(1 + random.nextInt(agent.size() - 1));
        yield new Hostile(false, kind, o.toString(), null, 0);
      }
      case BINARY -> {
        byte[] bytes =
            random.nextBoolean()
                ? template.toString().getBytes(StandardCharsets.UTF_8)
                : new byte[random.nextInt(70_000)];
        if (bytes.length > 0 && bytes[0] == 0) random.nextBytes(bytes);
        yield new Hostile(afterWelcome, kind, null, bytes, 0);
      }
      case OVERSIZED -> {
        String big = template.toString();
        big = big + " ".repeat(64 * 1024 + 1 + random.nextInt(200_000) - big.length());
        yield new Hostile(
            afterWelcome, kind, big, null, random.nextBoolean() ? 0 : 1 + random.nextInt(20_000));
      }
      case DEEP -> {
        int depth = 200 + random.nextInt(5_000);
        String open = random.nextBoolean() ? "[" : "{\"a\":";
        String close = open.equals("[") ? "]" : "}";
        String deep = open.repeat(depth) + "1" + close.repeat(depth);
        String nested = "{\"nested\":" + deep + "," + template.toString().substring(1);
        yield new Hostile(afterWelcome, kind, random.nextBoolean() ? deep : nested, null, 0);
      }
    };
  }
}
