package dev.tickmark.engine.host;

import static dev.tickmark.engine.host.HostDriver.NEVER;
import static dev.tickmark.engine.host.HostDriver.START;
import static dev.tickmark.engine.host.HostDriver.assertRejected;
import static dev.tickmark.engine.host.HostDriver.ok;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.host.Host.ToSession;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/** The host's part in reaching the workload: its SSH host key, and routing streams to its agent. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class HostStreamsTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  /** A real ed25519 public key line (the blob names its type). */
  static final String HOST_KEY =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl agent";

  static final String OTHER_KEY =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7r1rF0sUxVkQv8y0xv3xw7h5m8c1Gq2QdA1j5r5cTQ";

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("HostStreamsTest").withCustomConfig(CONFIG).build();

  private HostDriver host;

  @BeforeEach
  void freshHost() {
    host = new HostDriver(testKit, HostDriver.settings(NEVER, false), new TestClock(START), 4);
  }

  private String sshHostKey() {
    return ok(host.kit.<StatusReply<Host.SshHostKey>>runCommand(Host.GetSshHostKey::new)).key();
  }

  @Test
  void keepsTheAgentsSshHostKeyAcrossRestartsAndPersistsOnlyAChange() {
    host.registered();
    assertNull(sshHostKey(), "no key before an agent with an SSH server attached");
    TestProbe<ToSession> session = testKit.createTestProbe();
    var first =
        host.kit.<StatusReply<Host.Attached>>runCommand(
            r -> new Host.Attach(session.getRef(), HOST_KEY, r));
    assertTrue(first.reply().isSuccess());
    assertTrue(
        first.events().stream().anyMatch(e -> e instanceof Host.SshHostKeyChanged),
        "the first key is kept: " + first.events());
    assertEquals(HOST_KEY, sshHostKey());

    var again =
        host.kit.<StatusReply<Host.Attached>>runCommand(
            r -> new Host.Attach(session.getRef(), HOST_KEY, r));
    assertTrue(again.hasNoEvents(), "the same key again persists nothing: " + again.events());

    var other =
        host.kit.<StatusReply<Host.Attached>>runCommand(
            r -> new Host.Attach(session.getRef(), OTHER_KEY, r));
    assertEquals(1, other.events().size());
    assertEquals(OTHER_KEY, sshHostKey());

    var garbage =
        host.kit.<StatusReply<Host.Attached>>runCommand(
            r -> new Host.Attach(session.getRef(), "not a key", r));
    assertTrue(garbage.hasNoEvents(), "a malformed key is ignored: " + garbage.events());
    var none =
        host.kit.<StatusReply<Host.Attached>>runCommand(
            r -> new Host.Attach(session.getRef(), null, r));
    assertTrue(none.hasNoEvents(), "an agent without a key keeps the last one");

    host.assertRecovers();
    assertEquals(OTHER_KEY, sshHostKey(), "after a restart");
  }

  @Test
  void relaysAStreamOnlyForARentalRunningHereAndOnlyWhileItsAgentIsConnected() {
    TestProbe<ToSession> session = host.onMarket();
    TestProbe<StatusReply<Done>> renter = testKit.createTestProbe();

    var notHere =
        host.kit.<StatusReply<Done>>runCommand(r -> new Host.OpenStream("r1", "str_1", null, r));
    assertRejected(Rejection.NOT_FOUND, notHere);

    ok(host.reserve("r1", 1));
    assertRejected(
        Rejection.NOT_FOUND,
        host.kit.<StatusReply<Done>>runCommand(r -> new Host.OpenStream("r1", "str_1", null, r)));
    ok(host.confirm("r1"));

    host.kit.runCommand(new Host.OpenStream("r1", "str_1", null, renter.getRef()));
    Host.OpenStreamOnAgent open = session.expectMessageClass(Host.OpenStreamOnAgent.class);
    assertEquals("str_1", open.streamId());
    assertEquals("r1", open.rentalId());
    assertEquals(renter.getRef(), open.replyTo(), "the session answers the renter itself");

    TestProbe<Host.StreamControl> handle = testKit.createTestProbe();
    TestProbe<StatusReply<Host.StreamEnds>> claimer = testKit.createTestProbe();
    host.kit.runCommand(new Host.ClaimStream("str_1", handle.getRef(), claimer.getRef()));
    Host.ClaimStreamOnAgent claim = session.expectMessageClass(Host.ClaimStreamOnAgent.class);
    assertEquals(handle.getRef(), claim.handle());

    host.kit.runCommand(new Host.Detach(session.getRef()));
    assertRejected(
        Rejection.UNAVAILABLE,
        host.kit.<StatusReply<Done>>runCommand(r -> new Host.OpenStream("r1", "str_2", null, r)));
    assertRejected(
        Rejection.NOT_FOUND,
        host.kit.<StatusReply<Host.StreamEnds>>runCommand(
            r -> new Host.ClaimStream("str_2", handle.getRef(), r)));
  }
}
