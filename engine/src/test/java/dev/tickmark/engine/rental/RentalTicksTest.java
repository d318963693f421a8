package dev.tickmark.engine.rental;

import static dev.tickmark.engine.rental.RentalFixture.START;
import static dev.tickmark.engine.rental.RentalFixture.ok;
import static dev.tickmark.engine.rental.RentalFixture.onDemand;
import static dev.tickmark.engine.rental.RentalFixture.settings;
import static dev.tickmark.engine.rental.RentalFixture.spec;
import static dev.tickmark.engine.rental.RentalFixture.withMaxWakeGap;
import static dev.tickmark.engine.rental.RentalFixture.withSettleInterval;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.rental.Rental.Ended;
import dev.tickmark.engine.rental.Rental.Settings;
import dev.tickmark.engine.rental.Rental.Tick;
import dev.tickmark.engine.rental.Rental.Update;
import java.time.Duration;
import java.time.Instant;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.FishingOutcomes;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A running rental sleeps between its own instants (issue 15, decision 2): it wakes for its next
 * settlement, its limit and its deadline, not every second, and its subscribers' per-second ticks
 * come from {@link RentalTicks}, computed from the frozen price and the start. Each test has its
 * own actor system, so the node's counters ({@link EngineMetrics#rentalWakes}, {@link
 * EngineMetrics#ticksSent}) count its one rental only. The rental sleeps up to a minute here, as on
 * a node (the other entity tests wake it every second to follow their hand-moved clock).
 */
class RentalTicksTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  private static final long CEILING = 3_000_000;
  private static final long FLOOR = 2_890_000;
  private static final int CARDS = 2;
  private static final long DEPOSIT = 100_000_000;
  private static final Duration QUIET = Duration.ofMillis(1_500);

  private final ActorTestKit testKit = ActorTestKit.create("RentalTicksTest", CONFIG);
  private final EngineMetrics metrics = EngineMetrics.get(testKit.system());

  @AfterEach
  void shutdown() {
    testKit.shutdownTestKit();
  }

  private RentalFixture fixture(Duration settleInterval) {
    Settings s =
        withMaxWakeGap(withSettleInterval(settings(), settleInterval), Duration.ofMinutes(1));
    return new RentalFixture(testKit, s, DEPOSIT);
  }

  private static Instant at(long seconds) {
    return START.plusSeconds(seconds);
  }

  @Test
  void aRunningRentalNobodyWatchesSleepsUntilItsNextSettlementAndSettlesThen() {
    RentalFixture f = fixture(Duration.ofSeconds(3));
    f.running(onDemand(CARDS, CEILING), FLOOR);
    f.clock.advance(Duration.ofSeconds(2)); // seconds pass; no settlement is due yet

    // Per-second ticks would have woken it at least once by now.
    testKit.createTestProbe().expectNoMessage(QUIET);
    assertEquals(0, metrics.rentalWakes.sum(), "no wake between the start and the settlement");

    f.clock.advance(Duration.ofSeconds(1)); // 3 s: the settlement is due at its instant
    f.awaitCheckpoints(3L);
    assertEquals(1, metrics.rentalWakes.sum(), "one wake, for the settlement");
    assertEquals(0, metrics.ticksSent.sum(), "nobody watches: no ticks computed");
  }

  @Test
  void aSubscriberGetsOneTickASecondAtTheFrozenPriceWhileTheRentalSleeps() {
    RentalFixture f = fixture(Duration.ofSeconds(10));
    f.running(onDemand(CARDS, CEILING), FLOOR);
    TestProbe<Update> watcher = testKit.createTestProbe(Update.class);
    ok(f.ask(r -> new Rental.Subscribe(f.renterId, watcher.getRef(), r)));

    watcher.expectMessage(new Tick(0, 0)); // the current second at once
    for (long s = 1; s <= 4; s++) {
      f.clock.advance(Duration.ofSeconds(1));
      watcher.expectMessage(new Tick(s, Metering.cost(FLOOR, CARDS, s)));
    }
    assertEquals(5, metrics.ticksSent.sum());
    assertEquals(0, metrics.rentalWakes.sum(), "the ticks did not wake the rental");

    // Once it stops, its ticks stop (the watcher still hears the status changes).
    f.stop();
    watcher.fishForMessage(
        RentalFixture.WAIT,
        u ->
            u instanceof Rental.StatusChanged
                ? FishingOutcomes.complete()
                : FishingOutcomes.continueAndIgnore());
    f.clock.advance(Duration.ofSeconds(2));
    testKit.createTestProbe().expectNoMessage(QUIET);
    assertEquals(5, metrics.ticksSent.sum(), "no tick after the stop");
  }

  @Test
  void aCapReachedBetweenSettlementsEndsTheRentalAtItsLimitWithoutWaitingForTheSettlement() {
    RentalFixture f = fixture(Duration.ofSeconds(10));
    long price = 3_600 * 1_000; // 1,000 µ€ per GPU-second
    long covered = Metering.maxSecondsWithin(price, 1, 2_000, Long.MAX_VALUE);
    assertEquals(2, covered);
    f.running(spec(Listing.Tier.ON_DEMAND, 1, price, 2_000L, 30), price);
    f.clock.advance(Duration.ofSeconds(2)); // the cap, 8 s before a settlement would be due

    Ended ended = f.awaitEvent(Ended.class);
    assertEquals(new Ended(Rental.EndReason.RENTAL_CAP_REACHED, at(2), 2, at(2)), ended);
    assertEquals(1, metrics.rentalWakes.sum(), "woken once, at its limit");
    assertTrue(
        f.events(Rental.Settled.class).stream().allMatch(s -> s.checkpoint().cost() <= 2_000));
  }
}
