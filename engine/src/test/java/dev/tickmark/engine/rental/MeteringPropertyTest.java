package dev.tickmark.engine.rental;

import static dev.tickmark.engine.rental.RentalFixture.START;
import static dev.tickmark.engine.rental.RentalFixture.ok;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.rental.Rental.Checkpoint;
import dev.tickmark.engine.rental.Rental.Settings;
import dev.tickmark.engine.rental.Rental.View;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Money properties of metering, checked two ways: the pure {@link Metering} functions against exact
 * {@link BigInteger} arithmetic over random rentals (prices up to absurd, 1–8 cards, up to days,
 * settle intervals of 1–60 s, crashes that settle missed seconds late), and the REAL {@link Rental}
 * with the REAL {@link Account}s over random rentals with random crashes and lost messages, audited
 * from the accounts' journals. Each random run names its seed, so a failure replays.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class MeteringPropertyTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("MeteringPropertyTest").withCustomConfig(CONFIG).build();

  private static final BigInteger HOUR = BigInteger.valueOf(3_600);
  private static final BigInteger BPS = BigInteger.valueOf(Metering.BPS_DENOMINATOR);
  private static final long SEED = 0x71C4_3A2BL;

  /**
   * µ€ per GPU-hour: cents, typical, expensive, and far beyond anything real (the 128-bit path).
   */
  private static long anyPrice(Random random) {
    return switch (random.nextInt(4)) {
      case 0 -> 1 + random.nextInt(10_000);
      case 1 -> 100_000 + random.nextLong(50_000_000);
      case 2 -> random.nextLong(1_000_000_000_000L);
      default -> random.nextLong(1_000_000_000_000_000L);
    };
  }

  /** 1 s to a day, spread evenly over orders of magnitude. */
  private static long anyDuration(Random random) {
    return Math.max(1, (long) Math.pow(86_400, random.nextDouble()));
  }

  private static int anyFee(Random random) {
    return random.nextInt(3) == 0
        ? random.nextInt(Metering.BPS_DENOMINATOR + 1)
        : Metering.DEFAULT_FEE_BPS;
  }

  // ---------------------------------------------------------------------------------------------
  // Pure functions

  @Test
  void settlementsOfRandomRentalsAddUpToTheTotalExactly() {
    Random random = new Random(SEED);
    long daysLong = 0;
    for (int run = 0; run < 80; run++) {
      long price = anyPrice(random);
      int cards = 1 + random.nextInt(8);
      long duration = run < 2 ? 2 * 86_400 + random.nextInt(86_400) : anyDuration(random);
      int interval = 1 + random.nextInt(60);
      int fee = anyFee(random);
      String context =
          "seed "
              + SEED
              + " run "
              + run
              + ": price "
              + price
              + ", cards "
              + cards
              + ", "
              + duration
              + " s, every "
              + interval
              + " s, fee "
              + fee
              + " bps";
      if (duration >= 86_400) daysLong++;

      long settled = 0;
      long cost = 0;
      long provider = 0;
      long platform = 0;
      long charged = 0;
      long credited = 0;
      long platformCredited = 0;
      while (settled < duration) {
        long next = settled + interval;
        // A crash: the seconds missed while down are settled at once on recovery.
        if (random.nextInt(10) == 0) next += random.nextInt(20 * interval + 1);
        next = Math.min(next, duration);

        long nextCost = Metering.cost(price, cards, next);
        long nextProvider = Metering.providerShare(nextCost, fee);
        long nextPlatform = Metering.platformShare(nextCost, fee);
        String at = context + ", settling " + settled + " → " + next;
        assertCostIsExact(price, cards, next, nextCost, at);
        assertShareIsExact(nextCost, fee, nextProvider, at);

        long ticks = 0;
        for (long second = settled + 1; second <= next; second++) {
          long tick = Metering.chargeForSecond(price, cards, second);
          assertTrue(tick >= 0, at);
          ticks += tick;
        }
        long delta = nextCost - cost;
        long providerDelta = nextProvider - provider;
        long platformDelta = nextPlatform - platform;
        assertEquals(delta, ticks, at + ": the seconds' charges make up the settlement");
        assertTrue(
            delta >= 0 && providerDelta >= 0 && platformDelta >= 0,
            at + ": cumulative totals never go down");
        assertEquals(
            delta, providerDelta + platformDelta, at + ": renter charge = provider + platform");

        charged += delta;
        credited += providerDelta;
        platformCredited += platformDelta;
        settled = next;
        cost = nextCost;
        provider = nextProvider;
        platform = nextPlatform;
      }
      long total = Metering.cost(price, cards, duration);
      assertEquals(total, charged, context + ": settlements sum to the total");
      assertEquals(charged, credited + platformCredited, context + ": conserved in total");
      assertEquals(Metering.providerShare(total, fee), credited, context);
    }
    assertTrue(daysLong >= 2, "some rentals run for days");
  }

  private static void assertCostIsExact(
      long price, int cards, long seconds, long cost, String context) {
    BigInteger exact =
        BigInteger.valueOf(price)
            .multiply(BigInteger.valueOf(cards))
            .multiply(BigInteger.valueOf(seconds));
    BigInteger charged = BigInteger.valueOf(cost).multiply(HOUR);
    // floor: cost·3600 ≤ p·c·s < (cost+1)·3600
    assertTrue(
        charged.compareTo(exact) <= 0 && charged.add(HOUR).compareTo(exact) > 0,
        context + ": cost " + cost);
  }

  /**
   * The provider's share is the exact rational share of the charge, rounded down: within 1 µ€,
   * never above.
   */
  private static void assertShareIsExact(long cost, int fee, long provider, String context) {
    BigInteger exact =
        BigInteger.valueOf(cost).multiply(BigInteger.valueOf(Metering.BPS_DENOMINATOR - fee));
    BigInteger share = BigInteger.valueOf(provider).multiply(BPS);
    assertTrue(
        share.compareTo(exact) <= 0 && share.add(BPS).compareTo(exact) > 0,
        context + ": provider " + provider + " of " + cost);
  }

  @Test
  void secondsWithinABudgetAreTheMostTheBudgetPaysFor() {
    Random random = new Random(SEED + 1);
    for (int run = 0; run < 10_000; run++) {
      long price = random.nextInt(50) == 0 ? 0 : anyPrice(random);
      int cards = 1 + random.nextInt(8);
      long budget =
          random.nextBoolean()
              ? random.nextLong(1_000_000_000L)
              : random.nextLong(Long.MAX_VALUE / 4);
      long limit = random.nextInt(3) == 0 ? Long.MAX_VALUE : random.nextLong(10L * 365 * 86_400);
      String context =
          "seed "
              + (SEED + 1)
              + " run "
              + run
              + ": price "
              + price
              + ", cards "
              + cards
              + ", budget "
              + budget
              + ", limit "
              + limit;
      long seconds = Metering.maxSecondsWithin(price, cards, budget, limit);
      assertTrue(seconds >= 0 && seconds <= limit, context + ": " + seconds);
      if (price == 0) {
        assertEquals(limit, seconds, context);
        continue;
      }
      assertTrue(
          Metering.cost(price, cards, seconds) <= budget,
          context + ": " + seconds + " s cost more than the budget");
      if (seconds < limit) {
        BigInteger next =
            BigInteger.valueOf(price)
                .multiply(BigInteger.valueOf(cards))
                .multiply(BigInteger.valueOf(seconds + 1))
                .divide(HOUR);
        assertTrue(
            next.compareTo(BigInteger.valueOf(budget)) > 0,
            context + ": " + (seconds + 1) + " s fit too");
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The real rental and accounts

  private static final int RUNS = 24;
  private static final int AT_ONCE = 8;

  @Test
  void realRentalsWithCrashesChargeEverySecondExactlyOnce() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(AT_ONCE);
    try {
      List<Future<?>> runs = new ArrayList<>();
      for (int run = 0; run < RUNS; run++) {
        long seed = SEED + 100 + run;
        runs.add(
            pool.submit(
                () -> {
                  rentWithCrashes(seed);
                  return null;
                }));
      }
      for (Future<?> run : runs) {
        try {
          run.get(60, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
          if (e.getCause() instanceof Error error) throw error;
          throw e;
        }
      }
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * One random rental, with one in eight messages to the accounts lost: settle interval 1–60 s, 1–8
   * cards, a random price and fee, then a few steps of clock time, each maybe waiting for the
   * settlement, maybe crashing the rental (stop and respawn on the same persistence id), then a
   * stop, maybe another crash while it finishes the money, and an audit.
   */
  private void rentWithCrashes(long seed) {
    Random random = new Random(seed);
    int interval = 1 + random.nextInt(60);
    int fee = anyFee(random);
    int cards = 1 + random.nextInt(8);
    long floor = 1 + random.nextLong(random.nextBoolean() ? 10_000_000L : 10_000_000_000L);
    long ceiling = floor + random.nextLong(floor);
    long deposit = Metering.cost(ceiling, cards, 100_000) + 1_000_000;
    Settings settings =
        RentalFixture.withAskTimeout(
            RentalFixture.withFeeBps(
                RentalFixture.withSettleInterval(
                    RentalFixture.settings(), Duration.ofSeconds(interval)),
                fee),
            Duration.ofMillis(300));
    String context =
        "seed "
            + seed
            + ": every "
            + interval
            + " s, "
            + cards
            + " cards at "
            + floor
            + " (ceiling "
            + ceiling
            + "), fee "
            + fee
            + " bps";

    RentalFixture f = new RentalFixture(testKit, settings, deposit, new TestClock(START), true);
    // One in eight messages from the rental to an account is lost on the way (the rental must
    // retry).
    Random loss = new Random(seed ^ 0x5EEDL);
    f.renter.drop.set(c -> loss.nextInt(8) == 0);
    f.provider.drop.set(c -> loss.nextInt(8) == 0);
    f.running(RentalFixture.onDemand(cards, ceiling), floor);
    long elapsedMillis = 0;
    int steps = 2 + random.nextInt(5);
    StringBuilder story = new StringBuilder();
    for (int step = 0; step < steps; step++) {
      elapsedMillis += random.nextInt(31) * 1_000L + random.nextInt(1_000);
      f.clock.set(START.plusMillis(elapsedMillis));
      long second = elapsedMillis / 1_000;
      story.append(" +").append(second).append("s");
      // Keep what is unsettled well inside what the hold covers (it is extended at half), as
      // running ticks would.
      if (second - settledThrough(f) >= 30 || random.nextBoolean()) {
        awaitCaughtUp(f, second, interval, context + story);
        story.append(" settled");
      }
      if (random.nextInt(3) == 0) {
        f.restart();
        story.append(" crash");
      }
    }
    long stoppedAt = elapsedMillis / 1_000;
    View stopping = ok(f.stop(f.renterId));
    context += story + " stop";
    assertEquals(Rental.EndReason.STOPPED_BY_RENTER, stopping.endReason(), context);
    assertEquals(stoppedAt, stopping.billedSeconds(), context);
    if (random.nextBoolean()) {
      f.restart();
      context += " crash";
    }
    f.agentStopped();
    String where = context;
    f.awaitAssert(() -> assertEquals(Rental.Status.ENDED, f.get().status(), where));
    audit(f, floor, cards, fee, deposit, stoppedAt, where);
  }

  private static long settledThrough(RentalFixture f) {
    Checkpoint last = f.lastCheckpoint();
    return last == null ? 0 : last.throughSecond();
  }

  /**
   * A tick found a whole settle interval unsettled and settled it: less than an interval is left.
   */
  private static void awaitCaughtUp(RentalFixture f, long second, int interval, String context) {
    f.awaitAssert(
        () ->
            assertTrue(
                second - settledThrough(f) < interval,
                context + ": settled through " + settledThrough(f)));
  }

  /**
   * Every second from 1 to {@code billed} charged exactly once, and every µ€ charged credited to
   * someone.
   */
  private static void audit(
      RentalFixture f, long price, int cards, int fee, long deposit, long billed, String context) {
    long total = Metering.cost(price, cards, billed);
    Account.Summary renter = f.renter.summary();
    Account.Summary provider = f.provider.summary();
    assertEquals(total, renter.captured(), context + ": captured");
    assertEquals(0, renter.held(), context + ": held");
    assertEquals(deposit - total, renter.balance(), context + ": balance");
    assertEquals(
        Metering.providerShare(total, fee), provider.credited(), context + ": provider credited");
    assertEquals(total, provider.credited() + provider.platformCredited(), context + ": conserved");

    // The rental's checkpoints: strictly increasing, each exactly the formula.
    List<Checkpoint> checkpoints =
        f.events(Rental.Settled.class).stream().map(Rental.Settled::checkpoint).toList();
    long previous = 0;
    for (Checkpoint c : checkpoints) {
      assertTrue(c.throughSecond() > previous, context + ": checkpoints " + checkpoints);
      long cost = Metering.cost(price, cards, c.throughSecond());
      long share = Metering.providerShare(cost, fee);
      assertEquals(
          new Checkpoint(c.throughSecond(), cost, share, cost - share, c.at()), c, context);
      previous = c.throughSecond();
    }
    assertEquals(billed, previous, context + ": the last checkpoint is the bill");

    // The renter's ledger: captures at increasing seconds, each the difference of cumulative
    // totals.
    long through = 0;
    long cumulative = 0;
    for (Account.Captured c : f.renter.events(Account.Captured.class)) {
      assertTrue(c.throughSecond() > through, context + ": a second captured twice at " + c);
      assertEquals(
          Metering.cost(price, cards, c.throughSecond()), c.cumulativeAmount(), context + ": " + c);
      assertEquals(c.cumulativeAmount() - cumulative, c.amount(), context + ": " + c);
      through = c.throughSecond();
      cumulative = c.cumulativeAmount();
    }
    assertEquals(billed, through, context + ": captured through");
    assertEquals(total, cumulative, context);

    // The provider's ledger: the same seconds, split, closed by exactly one last credit.
    through = 0;
    long providerSum = 0;
    long platformSum = 0;
    List<Account.EarningsCredited> credits = f.provider.events(Account.EarningsCredited.class);
    for (int i = 0; i < credits.size(); i++) {
      Account.EarningsCredited c = credits.get(i);
      boolean closingOnly =
          c.last()
              && c.throughSecond() == through
              && c.providerAmount() == 0
              && c.platformAmount() == 0;
      if (!closingOnly)
        assertTrue(c.throughSecond() > through, context + ": a second credited twice at " + c);
      long cost = Metering.cost(price, cards, c.throughSecond());
      assertEquals(
          Metering.providerShare(cost, fee), c.cumulativeProviderAmount(), context + ": " + c);
      assertEquals(
          cost - c.cumulativeProviderAmount(), c.cumulativePlatformAmount(), context + ": " + c);
      assertEquals(
          c.last(),
          i == credits.size() - 1,
          context + ": only the final credit is last: " + credits);
      providerSum += c.providerAmount();
      platformSum += c.platformAmount();
      through = c.throughSecond();
    }
    assertEquals(billed, through, context + ": credited through");
    assertEquals(total, providerSum + platformSum, context);
    if (credits.isEmpty() && billed > 0) fail(context + ": nothing credited");
  }
}
