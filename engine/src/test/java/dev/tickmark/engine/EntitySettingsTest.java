package dev.tickmark.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.payout.PayoutRun;
import dev.tickmark.engine.rental.Rental;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * Each entity's {@code Settings.fromConfig} reads the node's keys (the shipped defaults are checked
 * against the node's own configuration in cluster-config's {@code EntitySettingsDefaultsTest}).
 */
class EntitySettingsTest {
  /** Every key the entities read, none at its shipped value. */
  private static final Config CONFIG =
      ConfigFactory.parseString(
          """
      tickmark {
        http.ask-timeout = 7s
        hosts { heartbeat-interval = 3s, heartbeat-timeout = 45s }
        verification {
          min-nvidia-driver = "550.1", min-rocm = "6.1", max-temperature-c = 80, vram-tolerance-permille = 20
          min-free-disk = 2 GiB, min-disk-write-mib-per-s = 150, allow-unisolated-hosts = true
        }
        rentals {
          settle-interval = 4s, hold-duration = 10 minutes, provisioning-timeout = 90s, stop-timeout = 15s
          retry-interval = 500ms
        }
        matcher { max-in-flight = 4, max-queued = 99, read-side-lag = 3s }
        market { fee-bps = 1000, allow-simulated-hosts = true }
        payouts { parallelism = 3, retry-interval = 2s }
      }
      """);

  @Test
  void rentalSettingsReadTheRentalsFeeAndAskTimeout() {
    assertEquals(
        new Rental.Settings(
            Duration.ofSeconds(4),
            600,
            1000,
            Duration.ofSeconds(90),
            Duration.ofSeconds(15),
            Duration.ofMillis(500),
            Duration.ofSeconds(7),
            Rental.Settings.DEFAULT_MAX_WAKE_GAP,
            Rental.Settings.DEFAULT_MAX_SETTLE_INTERVAL,
            Rental.Settings.DEFAULT_SETTLE_STRETCH_FROM),
        Rental.Settings.fromConfig(CONFIG));
  }

  @Test
  void matcherSettingsReadTheMatcherAndAskTimeout() {
    assertEquals(
        new Matcher.Settings(Duration.ofSeconds(7), 4, 99, Duration.ofSeconds(3)),
        Matcher.Settings.fromConfig(CONFIG));
  }

  @Test
  void payoutRunSettingsReadThePayoutsAndAskTimeout() {
    assertEquals(
        new PayoutRun.Settings(Duration.ofSeconds(7), Duration.ofSeconds(2), 3),
        PayoutRun.Settings.fromConfig(CONFIG));
  }

  @Test
  void verificationPolicyReadsTheThresholdsAndWhetherSimulatedHostsAreAllowed() {
    assertEquals(
        new Verification.Policy(true, "550.1", "6.1", 80, 20, 2L * 1024 * 1024 * 1024, 150, true),
        Verification.Policy.fromConfig(CONFIG));
  }

  @Test
  void hostSettingsReadTheHeartbeatAndThePolicyAndKeepTheNodesCollaborators() {
    Catalog catalog = Catalog.load();
    Host.Settings s = Host.Settings.fromConfig(CONFIG, catalog, Host.RentalLink.NONE);
    assertEquals(Duration.ofSeconds(45), s.heartbeatTimeout());
    assertEquals(3, s.heartbeatIntervalSeconds());
    assertEquals(Verification.Policy.fromConfig(CONFIG), s.policy());
    assertSame(catalog, s.catalog());
    assertSame(Host.RentalLink.NONE, s.rentals());
  }

  @Test
  void aMissingKeyIsAnErrorNotADefault() {
    Config withoutFee = CONFIG.withoutPath("tickmark.market.fee-bps");
    assertThrows(ConfigException.Missing.class, () -> Rental.Settings.fromConfig(withoutFee));
  }
}
