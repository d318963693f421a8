package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.security.KeyPair;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The conversation of docs/agent-protocol.md, frame by frame, with frames as they cross the wire.
 */
class SessionTest {
  private final KeyPair key = Ed25519.generate();
  private final Session session = new Session(key, "0.1.0");

  /** Feeds a frame as the node would send it: written to JSON and read back. */
  private List<Session.Action> feed(AgentFrame frame) throws Frames.MalformedFrame {
    return session.onFrame(Frames.read(Frames.write(frame)));
  }

  /** A frame the agent sends, as the node reads it. */
  private static AgentFrame onTheWire(AgentFrame frame) throws Frames.MalformedFrame {
    return Frames.read(Frames.write(frame));
  }

  private void establish(String credential) throws Frames.MalformedFrame {
    feed(new AgentFrame.Challenge("bm9uY2U="));
    feed(new AgentFrame.Welcome("host_1", credential, 5));
  }

  @Test
  void answersTheChallengeWithASignedHello() throws Exception {
    List<Session.Action> actions = feed(new AgentFrame.Challenge("q83vEjRWeJA="));

    AgentFrame.Hello hello = (AgentFrame.Hello) onTheWire(((Session.Send) actions.get(0)).frame());
    assertEquals(1, actions.size());
    assertEquals("0.1.0", hello.agentVersion());
    assertEquals(Ed25519.encodePublic(key.getPublic()), hello.publicKey());
    assertTrue(
        Ed25519.verify(hello.publicKey(), Ed25519.helloMessage("q83vEjRWeJA="), hello.signature()));
    assertEquals(Session.Phase.AWAITING_WELCOME, session.phase());
  }

  @Test
  void helloCarriesTheSshHostKeyWhenThereIsOne() throws Exception {
    assertNull(
        ((AgentFrame.Hello)
                onTheWire(
                    ((Session.Send) feed(new AgentFrame.Challenge("bm9uY2U=")).get(0)).frame()))
            .sshHostKey(),
        "no ssh server, no ssh_host_key");
    Session withSsh = new Session(key, "0.1.0", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample");
    List<Session.Action> actions =
        withSsh.onFrame(Frames.read(Frames.write(new AgentFrame.Challenge("bm9uY2U="))));
    AgentFrame.Hello hello = (AgentFrame.Hello) onTheWire(((Session.Send) actions.get(0)).frame());
    assertEquals("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample", hello.sshHostKey());
  }

  @Test
  void streamFramesGoToTheAgentOnceEstablished() throws Exception {
    establish("tmkhost_x");
    AgentFrame.OpenStream open = new AgentFrame.OpenStream("st_1", "rnt_1");
    assertEquals(List.of(new Session.StreamFrame(open)), feed(open));
    AgentFrame.CloseStream close = new AgentFrame.CloseStream("st_1", "renter left");
    assertEquals(List.of(new Session.StreamFrame(close)), feed(close));
  }

  @Test
  void measureAgainAsksTheAgentForANewReportOnceEstablished() throws Exception {
    String wire = Frames.write(new AgentFrame.MeasureAgain("requested by the provider"));
    assertTrue(wire.contains("\"type\":\"measure_again\""), wire);
    establish("tmkhost_x");
    assertEquals(
        List.of(new Session.MeasureAgain("requested by the provider")),
        feed(new AgentFrame.MeasureAgain("requested by the provider")));
    assertEquals(Session.Phase.ESTABLISHED, session.phase());

    Session early = new Session(key, "0.1.0");
    assertInstanceOf(
        Session.Ended.class,
        early.onFrame(new AgentFrame.MeasureAgain(null)).get(0),
        "before the welcome it is a broken node");
  }

  @Test
  void welcomeEstablishesWithCredentialAndInterval() throws Exception {
    feed(new AgentFrame.Challenge("bm9uY2U="));
    List<Session.Action> actions =
        feed(new AgentFrame.Welcome("host_1", "tmkhost_host_1_secret", 7));

    assertEquals(
        List.of(new Session.Established("host_1", "tmkhost_host_1_secret", Duration.ofSeconds(7))),
        actions);
    assertEquals(Session.Phase.ESTABLISHED, session.phase());
  }

  @Test
  void welcomeWithoutCredentialOrIntervalUsesTheDefault() throws Exception {
    feed(new AgentFrame.Challenge("bm9uY2U="));
    assertEquals(
        List.of(new Session.Established("host_1", null, Duration.ofSeconds(5))),
        feed(new AgentFrame.Welcome("host_1", null, 0)));
  }

  @Test
  void reportIsSignedOverItsCanonicalJson() throws Exception {
    establish(null);
    HardwareReport report =
        new HardwareReport(
            "0.1.0",
            false,
            "2026-11-29T18:00:00Z",
            List.of(
                new HardwareReport.Gpu(
                    0,
                    "GPU-1",
                    "NVIDIA H100 80GB HBM3",
                    "nvidia",
                    81559L,
                    "550.54.15",
                    "12.4",
                    34,
                    0L,
                    5,
                    16)),
            new HardwareReport.Cpu("AMD EPYC 9454 48-Core Processor", 96),
            1031000L,
            new HardwareReport.Disk("/var/lib/tickmark", 1_800_000_000_000L, 1450.2),
            null);

    AgentFrame.HardwareReportFrame frame =
        (AgentFrame.HardwareReportFrame) onTheWire(session.report(report));

    assertTrue(
        Ed25519.verify(
            Ed25519.encodePublic(key.getPublic()),
            CanonicalJson.bytes(frame.report()),
            frame.signature()));
    assertEquals(report, Frames.readReport(frame.report()));
    assertTrue(!frame.report().has("benchmark"), "no benchmark ran: the field is absent");
    ((com.fasterxml.jackson.databind.node.ObjectNode) frame.report())
        .put("memory_total_mib", 2_000_000L);
    assertTrue(
        !Ed25519.verify(
            Ed25519.encodePublic(key.getPublic()),
            CanonicalJson.bytes(frame.report()),
            frame.signature()),
        "a changed value breaks the signature");
  }

  @Test
  void heartbeatSeqIncreases() throws Exception {
    establish(null);
    List<AgentFrame.GpuSample> gpus = List.of(new AgentFrame.GpuSample(0, 0, 35, null));
    AgentFrame.Heartbeat first =
        session.heartbeat(Instant.parse("2026-11-29T18:00:05Z"), gpus, List.of());
    AgentFrame.Heartbeat second =
        session.heartbeat(Instant.parse("2026-11-29T18:00:10Z"), gpus, List.of());

    assertEquals(1, first.seq());
    assertEquals(2, second.seq());
    assertEquals(
        new AgentFrame.Heartbeat(2, "2026-11-29T18:00:10Z", gpus, List.of()), onTheWire(second));
  }

  @Test
  void nothingIsSentBeforeTheWelcome() throws Exception {
    feed(new AgentFrame.Challenge("bm9uY2U="));
    assertThrows(
        IllegalStateException.class, () -> session.heartbeat(Instant.now(), List.of(), List.of()));
  }

  @Test
  void verificationResultIsPassedOn() throws Exception {
    establish(null);
    AgentFrame.VerificationResult result =
        new AgentFrame.VerificationResult(
            "failed",
            List.of(
                new AgentFrame.Check("benchmark", "not_measured", null, null),
                new AgentFrame.Check("ram", "fail", "24000", ">= 155000")));
    assertEquals(List.of(new Session.Verified(result)), feed(result));
  }

  @Test
  void rentalFramesArePassedOnToTheRentals() throws Exception {
    establish(null);
    AgentFrame.StartRental start =
        new AgentFrame.StartRental(
            "rnt_1", List.of(0), "pytorch/pytorch", List.of("python"), null, false, null);
    assertEquals(List.of(new Session.RentalFrame(start)), feed(start));
    assertEquals(
        List.of(new Session.RentalFrame(new AgentFrame.StopRental("rnt_1", false))),
        feed(new AgentFrame.StopRental("rnt_1", false)));
    assertEquals(
        List.of(new Session.RentalFrame(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:02:00Z"))),
        feed(new AgentFrame.Preempt("rnt_1", "2026-11-29T18:02:00Z")));
    AgentFrame.UploadSnapshot upload = new AgentFrame.UploadSnapshot("rnt_1", "snap_1", List.of());
    assertEquals(List.of(new Session.RentalFrame(upload)), feed(upload));
    assertEquals(Session.Phase.ESTABLISHED, session.phase());
  }

  @ParameterizedTest
  @ValueSource(strings = {"token_used", "token_expired", "key_mismatch", "host_removed"})
  void refusalsThatRetryingCannotFixAreRejections(String code) throws Exception {
    feed(new AgentFrame.Challenge("bm9uY2U="));
    assertEquals(List.of(new Session.Rejected(code, "no")), feed(new AgentFrame.Error(code, "no")));
    assertEquals(Session.Phase.CLOSED, session.phase());
    assertEquals(
        List.of(),
        feed(new AgentFrame.Welcome("host_1", null, 5)),
        "a closed session ignores the rest");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "replaced",
        "rate_limited",
        "malformed_frame",
        "unexpected_frame",
        "bad_signature",
        "something_new"
      })
  void otherErrorsEndTheSession(String code) throws Exception {
    establish(null);
    assertEquals(List.of(new Session.Ended(code, "bye")), feed(new AgentFrame.Error(code, "bye")));
  }

  @Test
  void framesOutOfOrderEndTheSession() throws Exception {
    List<Session.Action> actions =
        feed(new AgentFrame.Welcome("host_1", "tmkhost_host_1_secret", 5));
    Session.Ended ended = assertInstanceOf(Session.Ended.class, actions.get(0));
    assertEquals("unexpected_frame", ended.code());
    assertTrue(
        ended.message().contains("welcome") && ended.message().contains("awaiting_challenge"),
        ended.message());
    assertTrue(!ended.message().contains("secret"), "a credential never reaches a log line");
  }

  @Test
  void aSecondChallengeIsUnexpected() throws Exception {
    establish(null);
    assertInstanceOf(Session.Ended.class, feed(new AgentFrame.Challenge("bm9uY2U=")).get(0));
  }

  @Test
  void rentalFramesBeforeTheWelcomeAreUnexpected() throws Exception {
    feed(new AgentFrame.Challenge("bm9uY2U="));
    assertInstanceOf(Session.Ended.class, feed(new AgentFrame.StopRental("rnt_1", false)).get(0));
  }
}
