package dev.tickmark.engine.sim;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.engine.snapshot.StorageMetering;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * Checks the market after every step, from outside: it reads every event as the in-memory journal
 * writes it (the testkit's storage policy hook), keeps its own books of accounts, rentals and hosts
 * from those events, and compares them with what the accounts themselves answer ({@link
 * Account.GetSummary}) and with what the simulated agents and network actually did (the instants
 * each host last heard from its agent, the stops the agents reported).
 *
 * <p><b>Covered seconds.</b> A rental is billed from {@code startedAt} (recorded by the rental when
 * the agent's {@code rental_started} reached it) to its end instant {@code endAt}: {@code billed =
 * ⌊endAt − startedAt⌋} in whole seconds, cut short only by what its hold pays for or its {@code
 * max_total} ({@link Metering#maxSecondsWithin}). Never past the end instant; for a {@code
 * host_lost} end never past the last proof of life its host received (the last heartbeat or attach
 * the simulation delivered to the Host entity, or the agent's own stop report); for {@code
 * preempted} never past the deadline. Every intermediate checkpoint (one persisted while running)
 * settles at most up to the host's last proof of life at the moment it is written, and never past a
 * preemption deadline.
 */
final class Auditor {
  record Violation(long step, String invariant, String detail) {
    @Override
    public String toString() {
      return "step " + step + " [" + invariant + "] " + detail;
    }
  }

  // ---- books kept from the journal

  static final class AccountBook {
    long deposited, captured, held, credited, platform, paidOut;
    // captured, credited and platform are net of refunds, as the account's own totals are
    long reversedProvider; // what refunds took back from the earnings
    final Map<String, Long> refunds = new TreeMap<>(); // per rental, cumulative
    final Map<String, Long> reversals = new TreeMap<>(); // per rental, provider + platform
    long storage; // of captured: storage, all platform revenue
    final Map<String, HoldBook> holds = new TreeMap<>();
    final Map<String, SourceBook> sources = new TreeMap<>();
    final Set<String> moneyKeys = new HashSet<>();
  }

  static final class HoldBook {
    long amount, captured, through;
    boolean released;
  }

  static final class SourceBook {
    long through, provider, platform;
    boolean last;
  }

  /** A snapshot as its journal says: its meter's settlements and how it ended. */
  static final class SnapshotBook {
    final String id;
    String renterId;
    long sizeBytes, price;
    boolean ready, failed, deleted, closed, suspended;
    long through, cost;
    final Set<Long> costs = new HashSet<>(List.of(0L));

    SnapshotBook(String id) {
      this.id = id;
    }

    /** Nothing more happens to it: failed or deleted with its money done. */
    boolean finished() {
      return closed || (failed && !ready);
    }
  }

  static final class RentalBook {
    final String id;
    String renterId;
    Rental.Spec spec;
    long holdAmount;
    Rental.Terms terms;
    Instant startedAt;
    Instant deadline;

    /** The seconds settled when the notice that set {@link #deadline} came. */
    long settledAtNotice;

    final List<Rental.Checkpoint> checkpoints = new ArrayList<>();
    Rental.EndReason reason;
    Instant endAt;

    /** What the end claims, then (after an {@link Rental.EndProven}) what the host proved. */
    long billed;

    /** The host proved less than the end claimed. */
    boolean provenShort;

    Instant endedAt;
    long jumpedAtEnd; // the wall clock's jumps so far when it ended (ms)
    Instant closedAt;
    boolean refused;

    /**
     * The latest event that finishes its money or cards (capture, credit, hold release, card
     * release).
     */
    Instant lastFinishingEvent;

    RentalBook(String id) {
      this.id = id;
    }

    boolean live() {
      return terms != null && endedAt == null;
    }

    boolean finished() {
      return refused || closedAt != null;
    }

    /** What an operator's refunds gave back, and the provider's share of it (cumulative). */
    long refunded, refundedProvider;

    Rental.Checkpoint last() {
      return checkpoints.isEmpty() ? null : checkpoints.get(checkpoints.size() - 1);
    }
  }

  static final class HostBook {
    String ownerId, region, gpu;
    Host.Status status;
    boolean online, draining;
    Listing listing = Listing.unlisted();
    int cards;
    final Map<String, List<Integer>> reservations = new TreeMap<>();

    /** Rentals that claimed (started on) their reservation here: it may no longer expire. */
    final java.util.Set<String> claimed = new java.util.TreeSet<>();

    /** While offline: the last heartbeat it went offline with, and when. */
    Instant offlineLastHeartbeat;

    Instant offlineAt;
  }

  final Map<String, AccountBook> accounts = new TreeMap<>();
  final Map<String, RentalBook> rentals = new TreeMap<>();
  final Map<String, HostBook> hosts = new TreeMap<>();
  final Map<String, SnapshotBook> snapshots = new TreeMap<>();
  final List<Violation> violations = new ArrayList<>();

  /** Rentals not closed (or refused) when last audited: the others' books no longer change. */
  private final Set<String> unaudited = new java.util.TreeSet<>();

  private long capturedClosed;
  private long creditedClosed;
  private final int feeBps;
  private final Duration inFlight;
  private final Function<String, Instant> lastProofOfLife;
  private final Function<String, List<Instant>> reportedStops;
  private final Function<String, Instant> lastListed;
  private final Function<String, Instant> goneSince;
  private final java.util.function.BiPredicate<String, Instant> goneBeforeTheEnd;
  private final java.util.function.LongSupplier clockJumped;
  private final java.util.function.LongSupplier step;
  private final Set<String> switchedOff;
  long checks;
  long events;

  Auditor(
      int feeBps,
      Duration inFlight,
      Function<String, Instant> lastProofOfLife,
      Function<String, List<Instant>> reportedStops,
      Function<String, Instant> lastListed,
      Function<String, Instant> goneSince,
      java.util.function.BiPredicate<String, Instant> goneBeforeTheEnd,
      java.util.function.LongSupplier clockJumped,
      java.util.function.LongSupplier step,
      Set<String> switchedOff) {
    this.feeBps = feeBps;
    this.inFlight = inFlight;
    this.lastProofOfLife = lastProofOfLife;
    this.reportedStops = reportedStops;
    this.lastListed = lastListed;
    this.goneSince = goneSince;
    this.goneBeforeTheEnd = goneBeforeTheEnd;
    this.clockJumped = clockJumped;
    this.step = step;
    this.switchedOff = switchedOff;
  }

  private void fail(String invariant, String detail) {
    checks++;
    if (switchedOff.contains(invariant)) return;
    violations.add(new Violation(step.getAsLong(), invariant, detail));
  }

  private void check(boolean ok, String invariant, java.util.function.Supplier<String> detail) {
    checks++;
    if (!ok) fail(invariant, detail.get());
  }

  // ---------------------------------------------------------------------------------------------
  // The journal feed: called by the storage policy, on the simulation's thread, as each write
  // happens.

  void onWrite(String persistenceId, List<Object> batch) {
    events += batch.size();
    int bar = persistenceId.indexOf('|');
    String type = persistenceId.substring(0, bar);
    String id = persistenceId.substring(bar + 1);
    switch (type) {
      case "Account" -> batch.forEach(e -> onAccount(id, (Account.Event) e));
      case "Rental" -> onRental(id, batch);
      case "Host" -> batch.forEach(e -> onHost(id, (Host.Event) e));
      case "Snapshot" -> batch.forEach(e -> onSnapshot(id, (Snapshot.Event) e));
      default -> {}
    }
  }

  private void finishing(String rentalId, Instant at) {
    RentalBook r = rentals.get(rentalId);
    if (r != null && (r.lastFinishingEvent == null || at.isAfter(r.lastFinishingEvent)))
      r.lastFinishingEvent = at;
  }

  private void onSnapshot(String id, Snapshot.Event event) {
    SnapshotBook b = snapshots.computeIfAbsent(id, SnapshotBook::new);
    if (event instanceof Snapshot.Created e) {
      b.renterId = e.renterId();
    } else if (event instanceof Snapshot.ManifestRecorded e) {
      b.sizeBytes = e.sizeBytes();
    } else if (event instanceof Snapshot.Ready e) {
      b.ready = true;
      b.price = e.pricePerGibMonth();
    } else if (event instanceof Snapshot.UploadFailed) {
      b.failed = true;
    } else if (event instanceof Snapshot.Suspended) {
      b.suspended = true;
    } else if (event instanceof Snapshot.Settled e) {
      settled(b, e.throughSecond(), e.cumulativeCost(), "settled");
    } else if (event instanceof Snapshot.Deleted e) {
      if (b.ready) settled(b, e.throughSecond(), e.cumulativeCost(), "deleted");
      b.deleted = true;
      if (!b.ready) b.closed = true;
    } else if (event instanceof Snapshot.Closed) {
      b.closed = true;
    }
  }

  /** A storage settlement is StorageMetering's cost of its second, and the seconds only grow. */
  private void settled(SnapshotBook b, long through, long cost, String what) {
    check(
        through >= b.through,
        "storage-settlements-grow",
        () -> b.id + " " + what + " through " + through + " after " + b.through);
    long exact = StorageMetering.cost(b.price, b.sizeBytes, through);
    check(
        cost == exact,
        "storage-exact",
        () -> b.id + " " + what + " " + cost + " through " + through + ", the meter says " + exact);
    b.through = through;
    b.cost = cost;
    b.costs.add(cost);
  }

  private void onAccount(String id, Account.Event event) {
    AccountBook a = accounts.computeIfAbsent(id, k -> new AccountBook());
    // To the account's books a storage capture is a capture; it is also platform revenue.
    if (event instanceof Account.StorageCaptured sc) {
      a.storage += sc.amount();
      event =
          new Account.Captured(
              sc.holdId(), sc.throughSecond(), sc.cumulativeAmount(), sc.amount(), sc.at());
    }
    if (event instanceof Account.Captured e) finishing(e.holdId(), e.at());
    if (event instanceof Account.HoldReleased e) finishing(e.holdId(), e.at());
    if (event instanceof Account.EarningsCredited e) finishing(e.sourceId(), e.at());
    if (event instanceof Account.Deposited e) {
      a.deposited += e.amount();
    } else if (event instanceof Account.HoldPlaced e) {
      HoldBook h = new HoldBook();
      h.amount = e.amount();
      check(
          !a.holds.containsKey(e.holdId()),
          "hold-once",
          () -> id + " placed hold " + e.holdId() + " twice");
      a.holds.put(e.holdId(), h);
      a.held += e.amount();
    } else if (event instanceof Account.HoldExtended e) {
      HoldBook h = a.holds.get(e.holdId());
      h.amount = e.newAmount();
      a.held += e.added();
    } else if (event instanceof Account.Captured e) {
      HoldBook h = a.holds.get(e.holdId());
      String key = e.holdId() + ":" + e.throughSecond();
      check(
          a.moneyKeys.add("capture " + key),
          "key-once",
          () -> id + " applied capture " + key + " twice");
      check(
          e.throughSecond() > h.through,
          "key-once",
          () -> id + " captured " + key + " at or below its mark " + h.through);
      check(!h.released, "hold-closed", () -> id + " captured " + key + " from a released hold");
      h.captured += e.amount();
      h.through = e.throughSecond();
      check(
          h.captured == e.cumulativeAmount(),
          "capture-cumulative",
          () ->
              id
                  + " "
                  + key
                  + " captured "
                  + h.captured
                  + " in all, the posting says "
                  + e.cumulativeAmount());
      check(
          h.captured <= h.amount,
          "capture-within-hold",
          () -> id + " " + key + " captured " + h.captured + " of a hold of " + h.amount);
      a.captured += e.amount();
      a.held -= e.amount();
    } else if (event instanceof Account.HoldReleased e) {
      HoldBook h = a.holds.get(e.holdId());
      check(!h.released, "release-once", () -> id + " released hold " + e.holdId() + " twice");
      check(
          e.released() == h.amount - h.captured,
          "release-rest",
          () ->
              id
                  + " released "
                  + e.released()
                  + " of hold "
                  + e.holdId()
                  + ", its rest is "
                  + (h.amount - h.captured));
      h.released = true;
      a.held -= e.released();
    } else if (event instanceof Account.HoldExpired e) {
      // A pending hold nobody confirmed: whole, never used, and gone (a late placement may open it
      // again, pending once more).
      HoldBook h = a.holds.get(e.holdId());
      check(
          h != null, "expire-once", () -> id + " expired hold " + e.holdId() + " it does not hold");
      if (h != null) {
        check(!h.released, "expire-once", () -> id + " expired released hold " + e.holdId());
        check(
            h.captured == 0 && e.released() == h.amount,
            "expire-unused",
            () ->
                id
                    + " expired hold "
                    + e.holdId()
                    + " releasing "
                    + e.released()
                    + " of "
                    + h.amount
                    + " with "
                    + h.captured
                    + " captured");
        a.holds.remove(e.holdId());
        a.held -= e.released();
      }
    } else if (event instanceof Account.EarningsCredited e) {
      SourceBook s = a.sources.computeIfAbsent(e.sourceId(), k -> new SourceBook());
      String key = e.sourceId() + ":" + e.throughSecond();
      boolean moves = e.providerAmount() != 0 || e.platformAmount() != 0;
      if (moves) {
        check(
            a.moneyKeys.add("credit " + key),
            "key-once",
            () -> id + " applied credit " + key + " twice");
        check(
            e.throughSecond() > s.through,
            "key-once",
            () -> id + " credited " + key + " at or below its mark " + s.through);
      }
      check(
          !s.last,
          "source-closed",
          () -> id + " credited " + key + " after the source's last settlement");
      s.provider += e.providerAmount();
      s.platform += e.platformAmount();
      s.through = Math.max(s.through, e.throughSecond());
      s.last = e.last();
      check(
          s.provider == e.cumulativeProviderAmount() && s.platform == e.cumulativePlatformAmount(),
          "credit-cumulative",
          () ->
              id
                  + " "
                  + key
                  + " credited "
                  + s.provider
                  + "+"
                  + s.platform
                  + " in all, the posting says "
                  + e.cumulativeProviderAmount()
                  + "+"
                  + e.cumulativePlatformAmount());
      a.credited += e.providerAmount();
      a.platform += e.platformAmount();
    } else if (event instanceof Account.PaidOut e) {
      a.paidOut += e.amount();
    } else if (event instanceof Account.ChargeRefunded e) {
      long before = a.refunds.getOrDefault(e.rentalId(), 0L);
      check(
          e.cumulativeAmount() > before && e.amount() == e.cumulativeAmount() - before,
          "refunded-once",
          () -> id + " refunded " + e + " after " + before + " for " + e.rentalId());
      a.refunds.put(e.rentalId(), e.cumulativeAmount());
      a.captured -= e.amount();
    } else if (event instanceof Account.EarningsReversed e) {
      long before = a.reversals.getOrDefault(e.rentalId(), 0L);
      long total = e.cumulativeProvider() + e.cumulativePlatform();
      check(
          total > before && e.providerAmount() + e.platformAmount() == total - before,
          "reversed-once",
          () -> id + " reversed " + e + " after " + before + " for " + e.rentalId());
      a.reversals.put(e.rentalId(), total);
      a.credited -= e.providerAmount();
      a.platform -= e.platformAmount();
      a.reversedProvider += e.providerAmount();
    }
  }

  private void onRental(String id, List<Object> batch) {
    RentalBook r = rentals.computeIfAbsent(id, RentalBook::new);
    if (r.closedAt == null) unaudited.add(id);
    // The final settlement comes with the end (an end the host reported) or after it, once the
    // host proved it.
    boolean ending = r.endedAt != null || batch.stream().anyMatch(e -> e instanceof Rental.Ended);
    for (Object o : batch) {
      Rental.Event event = (Rental.Event) o;
      if (event instanceof Rental.Requested e) {
        r.renterId = e.renterId();
        r.spec = e.spec();
        r.holdAmount = e.holdAmount();
      } else if (event instanceof Rental.Refused) {
        r.refused = true;
      } else if (event instanceof Rental.Matched e) {
        r.terms = e.terms();
      } else if (event instanceof Rental.Started e) {
        r.startedAt = e.startedAt();
        // Its workload runs only on cards its host claimed for it: a reservation that expired
        // (the rental confirmed too late) was refused, never started.
        HostBook h = r.terms == null ? null : hosts.get(r.terms.hostId());
        check(
            h == null || h.claimed.contains(id),
            "started-on-claimed-cards",
            () -> id + " started on " + r.terms.hostId() + " without a claimed reservation there");
      } else if (event instanceof Rental.HoldExtended e) {
        r.holdAmount = e.holdAmount();
      } else if (event instanceof Rental.PreemptionScheduled e) {
        if (r.deadline == null || e.deadline().isBefore(r.deadline)) {
          r.deadline = e.deadline();
          r.settledAtNotice = r.last() == null ? 0 : r.last().throughSecond();
        }
      } else if (event instanceof Rental.Settled e) {
        onSettled(r, e, ending);
      } else if (event instanceof Rental.Ended e) {
        onEnded(r, e);
      } else if (event instanceof Rental.EndProven e) {
        r.billed = e.billedSeconds();
        r.provenShort = true;
      } else if (event instanceof Rental.Closed e) {
        r.closedAt = e.at();
        onFinalBill(r);
        onClosed(r);
      } else if (event instanceof Rental.Refunded e) {
        onRefunded(r, e);
      }
    }
  }

  /**
   * A refund: only of a closed rental, never beyond its charge, the cumulative figures grown by
   * exactly the amount, and split back as the charge was (the provider's share rounded down).
   */
  private void onRefunded(RentalBook r, Rental.Refunded e) {
    Rental.Checkpoint charge = r.last();
    check(
        r.closedAt != null && charge != null,
        "refund-after-close",
        () -> r.id + " refunded " + e.amount() + " before it closed");
    if (charge == null) return;
    check(
        e.amount() > 0
            && e.cumulativeAmount() == r.refunded + e.amount()
            && e.cumulativeAmount() <= charge.cost(),
        "refund-within-charge",
        () ->
            r.id
                + " refunded "
                + e.amount()
                + " to "
                + e.cumulativeAmount()
                + " after "
                + r.refunded
                + " of a charge of "
                + charge.cost());
    long provider =
        java.math.BigInteger.valueOf(e.cumulativeAmount())
            .multiply(java.math.BigInteger.valueOf(charge.provider()))
            .divide(java.math.BigInteger.valueOf(Math.max(1, charge.cost())))
            .longValueExact();
    check(
        e.cumulativeProvider() == provider
            && e.cumulativePlatform() == e.cumulativeAmount() - provider
            && provider >= r.refundedProvider,
        "refund-split",
        () -> r.id + " split " + e + " of " + charge + "; the provider's share is " + provider);
    r.refunded = e.cumulativeAmount();
    r.refundedProvider = e.cumulativeProvider();
  }

  private void onSettled(RentalBook r, Rental.Settled e, boolean ending) {
    Rental.Checkpoint c = e.checkpoint();
    Rental.Checkpoint prev = r.last();
    String where = r.id + " checkpoint through " + c.throughSecond() + " at " + e.at();
    check(
        prev == null || c.throughSecond() > prev.throughSecond(),
        "checkpoints-grow",
        () -> where + " after " + prev.throughSecond());
    long cost = Metering.cost(r.terms.pricePerGpuHour(), r.terms.cards().size(), c.throughSecond());
    long provider = Metering.providerShare(cost, feeBps);
    check(
        c.cost() == cost && c.provider() == provider && c.platform() == cost - provider,
        "checkpoint-exact",
        () ->
            where
                + ": "
                + c
                + ", expected cost "
                + cost
                + " split "
                + provider
                + "/"
                + (cost - provider));
    Instant through = r.startedAt.plusSeconds(c.throughSecond());
    if (!ending) {
      // Settled while running: only what the host is known to have run, and never past a preemption
      // deadline.
      Instant proof = lastProofOfLife.apply(r.terms.hostId());
      check(
          c.throughSecond() == 0 || (proof != null && !through.isAfter(proof)),
          "settled-within-heartbeats",
          () ->
              where
                  + " settles to "
                  + through
                  + ", past the last heartbeat host "
                  + r.terms.hostId()
                  + " received ("
                  + proof
                  + ")");
      check(
          r.deadline == null || !through.isAfter(r.deadline),
          "settled-within-deadline",
          () -> where + " settles to " + through + ", past the preemption deadline " + r.deadline);
    }
    if (ending && r.reason != null && r.reason != Rental.EndReason.HOST_LOST) {
      // A final settlement the host did not report itself waits for its word: a heartbeat at or
      // after the seconds it settles, or the agent's report that it stopped the workload.
      Instant proof = lastProofOfLife.apply(r.terms.hostId());
      boolean reported = !reportedStops.apply(r.id).isEmpty();
      check(
          reported || (proof != null && !through.isAfter(proof)),
          "final-settled-within-heartbeats",
          () ->
              where
                  + " settles its end to "
                  + through
                  + ", past the last heartbeat host "
                  + r.terms.hostId()
                  + " received ("
                  + proof
                  + ") with no report of the stop");
    }
    r.checkpoints.add(c);
  }

  private void onEnded(RentalBook r, Rental.Ended e) {
    r.reason = e.reason();
    r.endAt = e.endAt();
    r.billed = e.billedSeconds();
    r.endedAt = e.at();
    r.jumpedAtEnd = clockJumped.getAsLong();
    if (r.startedAt == null) {
      check(
          e.billedSeconds() == 0 && r.checkpoints.isEmpty(),
          "unstarted-free",
          () ->
              r.id
                  + " ended "
                  + e.reason()
                  + " before it started but bills "
                  + e.billedSeconds()
                  + " s");
    }
  }

  /**
   * Once closed, a rental's bill is final (the final settlement waits for the host's word, and an
   * {@link Rental.EndProven} may lower what the end claimed): check it against the end, the hold,
   * the cap and the heartbeats.
   */
  private void onFinalBill(RentalBook r) {
    if (r.startedAt == null || r.endAt == null) return;
    FinalBill e = new FinalBill(r.reason, r.endAt, r.billed, r.endedAt);
    String where =
        r.id
            + " ended "
            + e.reason()
            + " at "
            + e.endAt()
            + " billed "
            + e.billedSeconds()
            + " s from "
            + r.startedAt
            + (r.provenShort ? " (proven short of its claim)" : "");
    long window = Math.max(0, Duration.between(r.startedAt, e.endAt()).getSeconds());
    // A host_lost end names the host's last heartbeat; after the host restarted that is the last
    // one it had recorded
    // (every 10 s), which may be older than what its rentals settled to: a separate invariant,
    // bounded by the real one below.
    check(
        e.billedSeconds() <= window,
        e.reason() == Rental.EndReason.HOST_LOST
            ? "host-lost-end-before-settled"
            : "billed-within-end",
        () ->
            where
                + ": "
                + (e.billedSeconds() - window)
                + " s past its end instant (settled earlier beyond what it later ended at)");
    int cards = r.terms.cards().size();
    long price = r.terms.pricePerGpuHour();
    long bound = 10L * 365 * 24 * 3600;
    long byHold = Metering.maxSecondsWithin(price, cards, r.holdAmount, bound);
    long byCap =
        r.spec.maxTotal() == null
            ? bound
            : Metering.maxSecondsWithin(price, cards, r.spec.maxTotal(), bound);
    long expected = Math.min(window, Math.min(byHold, byCap));
    check(
        r.provenShort || e.billedSeconds() >= expected,
        "billed-covered",
        () ->
            where
                + ": covers "
                + expected
                + " s (end "
                + window
                + ", hold "
                + byHold
                + ", max_total "
                + byCap
                + ") but bills "
                + e.billedSeconds());
    Rental.Checkpoint last = r.last();
    check(
        (last == null ? 0 : last.throughSecond()) == e.billedSeconds(),
        "final-checkpoint",
        () ->
            where
                + " but its last checkpoint is through "
                + (last == null ? 0 : last.throughSecond()));
    if (e.reason() == Rental.EndReason.HOST_LOST) {
      Instant proof = lastProofOfLife.apply(r.terms.hostId());
      List<Instant> stops = reportedStops.apply(r.id);
      boolean reported = stops.contains(e.endAt());
      Instant billedTo = r.startedAt.plusSeconds(e.billedSeconds());
      check(
          reported || e.billedSeconds() == 0 || (proof != null && !billedTo.isAfter(proof)),
          "host-lost-within-heartbeats",
          () ->
              where
                  + ": billed to "
                  + billedTo
                  + ", past the last heartbeat host "
                  + r.terms.hostId()
                  + " received ("
                  + proof
                  + ")");
    }
    // Finding E: nothing after the workload was gone is billed. The agent lists the workloads it
    // runs in every heartbeat; once one that no longer listed this one reached the host before the
    // end (in the order things happened, whatever the clock read), the bill goes no further than
    // the last heartbeat that listed it.
    Instant listed = lastListed.apply(r.id);
    Instant gone = goneSince.apply(r.id);
    Instant billedEnd = r.startedAt.plusSeconds(e.billedSeconds());
    check(
        listed == null
            || e.billedSeconds() == 0
            || gone == null
            || !goneBeforeTheEnd.test(r.id, e.endAt())
            || !billedEnd.isAfter(listed.plusSeconds(1)),
        "billed-within-listing",
        () ->
            where
                + ": billed to "
                + billedEnd
                + ", but the last heartbeat that listed its workload reached host "
                + r.terms.hostId()
                + " at "
                + listed
                + " and one that no longer did at "
                + gone);
    HostBook host = hosts.get(r.terms.hostId());
    if (host != null
        && host.offlineAt != null
        && e.reason() != Rental.EndReason.HOST_LOST
        && host.offlineLastHeartbeat != null
        && e.at().isAfter(host.offlineAt.plus(inFlight))) {
      // The host went offline (its rentals were told) well before this end: nothing after its last
      // heartbeat is billed. "Last" as host-lost-within-heartbeats reads it, the latest clock
      // reading of a heartbeat it received: after a step back the one it went offline with can read
      // earlier than one received before it, which proved the seconds billed (seed 1 with
      // snapshots).
      Instant proof = lastProofOfLife.apply(r.terms.hostId());
      Instant lastHeartbeat =
          proof != null && proof.isAfter(host.offlineLastHeartbeat)
              ? proof
              : host.offlineLastHeartbeat;
      Instant billedTo = r.startedAt.plusSeconds(e.billedSeconds());
      check(
          !billedTo.isAfter(lastHeartbeat.plusSeconds(1)) || e.billedSeconds() == 0,
          "billed-while-host-offline",
          () ->
              where
                  + ": billed to "
                  + billedTo
                  + ", but host "
                  + r.terms.hostId()
                  + " went offline at "
                  + host.offlineAt
                  + " with its last heartbeat at "
                  + host.offlineLastHeartbeat);
    }
    if (e.reason() == Rental.EndReason.PREEMPTED) {
      Instant billedTo = r.startedAt.plusSeconds(e.billedSeconds());
      check(
          // What was settled before the notice came was proven before any deadline existed: a
          // clock stepped back after those seconds can give a deadline that reads earlier than them
          // (in time that only moves forward the notice, and so its deadline, comes after them).
          r.deadline != null
              && (!billedTo.isAfter(r.deadline) || e.billedSeconds() <= r.settledAtNotice),
          "preempted-within-deadline",
          () -> where + ": billed to " + billedTo + ", deadline " + r.deadline);
    }
  }

  /** A rental's final bill: its end, and the seconds billed once the host had its say. */
  private record FinalBill(
      Rental.EndReason reason, Instant endAt, long billedSeconds, Instant at) {}

  /**
   * A stopping rental whose agent never reports the workload stopped closes once its money and
   * cards are done and its stop timeout has passed since it ended — not a stop timeout after its
   * last redelivery.
   */
  private void onClosed(RentalBook r) {
    if (r.startedAt == null || r.terms == null || r.endedAt == null) return;
    boolean reported =
        reportedStops.apply(r.id).stream().anyMatch(at -> !at.isBefore(r.endedAt.minusSeconds(1)));
    if (reported) return;
    Instant done = r.lastFinishingEvent == null ? r.endedAt : r.lastFinishingEvent;
    // The stop timeout runs on the node's timers, which a wall clock jump does not move: the jumps
    // since the end are no time the rental waited.
    Instant due =
        max(r.endedAt.plus(stopTimeout), done)
            .plus(CLOSE_SLACK)
            .plusMillis(Math.max(0, clockJumped.getAsLong() - r.jumpedAtEnd));
    check(
        !r.closedAt.isAfter(due),
        "closes-when-agent-silent",
        () ->
            r.id
                + " ended at "
                + r.endedAt
                + ", its money and cards were done at "
                + done
                + ", its agent never reported the stop, yet it closed only at "
                + r.closedAt
                + " (due by "
                + due
                + ": stop timeout "
                + stopTimeout.toSeconds()
                + " s after the end, or the last of those, + "
                + CLOSE_SLACK.toSeconds()
                + " s)");
  }

  /**
   * What a closing may take beyond its due time: an ask timeout, the longest redelivery backoff,
   * the network's delay (20 s), and a minute for the waker when the stopping rental itself crashed
   * and sleeps until it is woken (as a node's RentalWaker does, every minute). The bug this
   * invariant found postponed the close by a stop timeout per failed delivery: minutes.
   */
  static final Duration CLOSE_SLACK = Duration.ofSeconds(20 + 60);

  Duration stopTimeout = Duration.ofSeconds(30);

  private static Instant max(Instant a, Instant b) {
    return a.isAfter(b) ? a : b;
  }

  private void onHost(String id, Host.Event event) {
    HostBook h = hosts.computeIfAbsent(id, k -> new HostBook());
    if (event instanceof Host.CardsReleased e) finishing(e.rentalId(), e.at());
    if (event instanceof Host.Invited e) {
      h.ownerId = e.ownerId();
      h.region = e.region();
    } else if (event instanceof Host.Registered) {
      h.status = Host.Status.REGISTERED;
    } else if (event instanceof Host.ReportVerified e) {
      h.status = h.status == Host.Status.EVICTED ? Host.Status.EVICTED : Host.Status.VERIFIED;
      h.cards = e.outcome().cards().size();
      h.gpu = e.outcome().cards().isEmpty() ? null : e.outcome().cards().get(0).gpu();
    } else if (event instanceof Host.WentOnline) {
      h.online = true;
      h.offlineAt = null;
      h.offlineLastHeartbeat = null;
    } else if (event instanceof Host.WentOffline e) {
      h.online = false;
      h.offlineAt = e.at();
      h.offlineLastHeartbeat = e.lastHeartbeatAt();
    } else if (event instanceof Host.HeartbeatRecorded) {
      h.online = true;
    } else if (event instanceof Host.ListingUpdated e) {
      h.listing = e.listing();
    } else if (event instanceof Host.DrainStarted) {
      h.draining = true;
    } else if (event instanceof Host.Evicted) {
      h.status = Host.Status.EVICTED;
    } else if (event instanceof Host.Reinstated) {
      h.status = Host.Status.VERIFIED;
    } else if (event instanceof Host.CardsReserved e) {
      for (Map.Entry<String, List<Integer>> other : h.reservations.entrySet()) {
        check(
            other.getValue().stream().noneMatch(e.cards()::contains),
            "card-once",
            () ->
                id
                    + " reserved cards "
                    + e.cards()
                    + " for "
                    + e.rentalId()
                    + " while "
                    + other.getKey()
                    + " holds "
                    + other.getValue());
      }
      h.reservations.put(e.rentalId(), e.cards());
    } else if (event instanceof Host.CardsReleased e) {
      h.reservations.remove(e.rentalId());
      h.claimed.remove(e.rentalId());
    } else if (event instanceof Host.CardsClaimed e) {
      h.claimed.add(e.rentalId());
    } else if (event instanceof Host.CardsRented e) {
      h.claimed.add(e.rentalId());
    } else if (event instanceof Host.CardsExpired e) {
      check(
          h.reservations.containsKey(e.rentalId()) && !h.claimed.contains(e.rentalId()),
          "expire-unclaimed",
          () -> id + " expired the reservation of " + e.rentalId() + ", not one unclaimed here");
      h.reservations.remove(e.rentalId());
    }
  }

  // ---------------------------------------------------------------------------------------------
  // After every step, at quiescence.

  /** {@code summaries}: what each account answers to {@link Account.GetSummary}, by id. */
  void afterStep(
      Map<String, Account.Summary> summaries,
      Instant now,
      Duration stopTimeout,
      Duration closeSlack) {
    long deposited = 0, balances = 0, captured = 0;
    for (Map.Entry<String, AccountBook> entry : accounts.entrySet()) {
      String id = entry.getKey();
      AccountBook a = entry.getValue();
      Account.Summary s = summaries.get(id);
      check(s != null && s.open(), "summary", () -> id + " did not answer its summary");
      if (s == null) continue;
      check(
          s.deposited() == a.deposited
              && s.captured() == a.captured
              && s.held() == a.held
              && s.credited() == a.credited
              && s.platformCredited() == a.platform
              && s.paidOut() == a.paidOut,
          "account-matches-journal",
          () ->
              id
                  + " answers "
                  + s
                  + " but its events sum to deposited="
                  + a.deposited
                  + " captured="
                  + a.captured
                  + " held="
                  + a.held
                  + " credited="
                  + a.credited
                  + " platform="
                  + a.platform
                  + " paidOut="
                  + a.paidOut);
      check(
          s.balance() == s.deposited() - s.captured(),
          "balance",
          () -> id + " balance " + s.balance() + " ≠ deposited − captured");
      check(
          s.available() == s.balance() - s.held(),
          "available",
          () -> id + " available " + s.available() + " ≠ balance − held");
      check(s.available() >= 0, "available-not-negative", () -> id + " available " + s.available());
      check(s.held() >= 0, "held-not-negative", () -> id + " held " + s.held());
      // below zero only by what refunds took back (the earnings were paid out before them)
      check(
          s.earnings() == s.credited() - s.paidOut() && s.earnings() + a.reversedProvider >= 0,
          "earnings",
          () -> id + " earnings " + s.earnings());
      long holdSum =
          a.holds.values().stream()
              .filter(h -> !h.released)
              .mapToLong(h -> h.amount - h.captured)
              .sum();
      check(
          holdSum == a.held,
          "held-is-open-holds",
          () -> id + " held " + a.held + " but its open holds' rests sum to " + holdSum);
      deposited += s.deposited();
      balances += s.balance();
      captured += s.captured();
    }
    long dep = deposited, bal = balances, cap = captured;
    check(
        dep == bal + cap,
        "conservation",
        () -> "deposited " + dep + " ≠ balances " + bal + " + captured " + cap);

    // Per rental: what the renter paid and the provider and platform got, against the rental's own
    // checkpoints.
    Map<String, List<Integer>> liveCards = new TreeMap<>();
    for (java.util.Iterator<String> it = unaudited.iterator(); it.hasNext(); ) {
      RentalBook r = rentals.get(it.next());
      HoldBook hold = r.renterId == null ? null : book(r.renterId).holds.get(r.id);
      SourceBook source = r.terms == null ? null : book(r.terms.providerId()).sources.get(r.id);
      long paid = hold == null ? 0 : hold.captured;
      long earned = source == null ? 0 : source.provider + source.platform;
      Rental.Checkpoint last = r.last();
      long cost = last == null ? 0 : last.cost();
      check(
          paid <= cost && earned <= cost,
          "postings-within-checkpoints",
          () ->
              r.id
                  + " captured "
                  + paid
                  + ", credited "
                  + earned
                  + ", but its last checkpoint costs "
                  + cost);
      check(
          paid == 0 || r.checkpoints.stream().anyMatch(c -> c.cost() == paid),
          "capture-is-a-checkpoint",
          () -> r.id + " captured " + paid + ", which is no checkpoint's cost");
      if (r.closedAt != null) {
        check(
            paid == cost && earned == cost,
            "closed-settled",
            () ->
                r.id
                    + " closed with cost "
                    + cost
                    + " but captured "
                    + paid
                    + " and credited "
                    + earned);
        check(
            hold == null || hold.released,
            "closed-hold-released",
            () -> r.id + " closed but its hold is still open");
        HostBook h = hosts.get(r.terms == null ? "" : r.terms.hostId());
        check(
            h == null || !h.reservations.containsKey(r.id),
            "closed-cards-released",
            () ->
                r.id
                    + " closed but host "
                    + r.terms.hostId()
                    + " still reserves "
                    + h.reservations.get(r.id));
        capturedClosed += paid;
        creditedClosed += earned;
        it.remove(); // closed: its books do not change any more
      }
      if (r.refused) it.remove();
      // A matched rental holds its cards while its host reserves them for it: one whose pending
      // reservation expired before it confirmed (a forward clock jump) holds nothing, and its late
      // claim is refused (started-on-claimed-cards); the host never reserves a card twice
      // (card-once).
      HostBook reservedOn = r.terms == null ? null : hosts.get(r.terms.hostId());
      if (r.live() && (reservedOn == null || reservedOn.reservations.containsKey(r.id))) {
        String hostId = r.terms.hostId();
        for (Map.Entry<String, List<Integer>> other : liveCards.entrySet()) {
          String[] parts = other.getKey().split(" ", 2);
          if (!parts[0].equals(hostId)) continue;
          check(
              other.getValue().stream().noneMatch(r.terms.cards()::contains),
              "card-in-one-live-rental",
              () ->
                  r.id
                      + " runs on "
                      + hostId
                      + " cards "
                      + r.terms.cards()
                      + " as does "
                      + parts[1]
                      + " "
                      + other.getValue());
        }
        liveCards.put(hostId + " " + r.id, r.terms.cards());
      }
      if (r.endedAt != null && r.closedAt == null) {
        Duration stopping = Duration.between(r.endedAt, now);
        check(
            stopping.compareTo(stopTimeout.plus(closeSlack)) <= 0,
            "closes-in-time",
            () ->
                r.id
                    + " has been stopping for "
                    + stopping.toSeconds()
                    + " s (stop timeout "
                    + stopTimeout.toSeconds()
                    + " s)");
      }
    }
    long cc = this.capturedClosed, ec = this.creditedClosed;
    check(
        cc == ec,
        "closed-captured-is-credited",
        () -> "closed rentals captured " + cc + " but credited " + ec);
    auditSnapshots();
  }

  /**
   * What each snapshot's renter paid for its storage: never more than its last settlement and
   * always one of its settlements' costs; once closed exactly its final cost, its hold released.
   */
  private void auditSnapshots() {
    for (SnapshotBook b : snapshots.values()) {
      if (b.renterId == null) continue;
      HoldBook hold = book(b.renterId).holds.get(b.id);
      long paid = hold == null ? 0 : hold.captured;
      check(
          paid <= b.cost,
          "storage-within-settled",
          () -> b.id + " captured " + paid + " beyond its last settlement's " + b.cost);
      check(
          b.costs.contains(paid),
          "storage-capture-is-a-settlement",
          () -> b.id + " captured " + paid + ", which is no settlement's cost");
      if (b.closed && b.ready) {
        check(
            paid == b.cost,
            "snapshot-closed-captured",
            () -> b.id + " closed having captured " + paid + " of its final " + b.cost);
        check(
            hold == null || hold.released,
            "snapshot-closed-released",
            () -> b.id + " closed with its hold open");
      }
    }
  }

  /**
   * At the end of a run, after every rental was stopped and the market left alone: nothing may
   * remain open.
   */
  void atRest(Map<String, Account.Summary> summaries) {
    for (RentalBook r : rentals.values()) {
      check(
          r.finished(),
          "all-closed",
          () ->
              r.id
                  + " is still "
                  + (r.endedAt == null
                      ? (r.terms == null ? "pending" : "live")
                      : "stopping (" + r.reason + ")")
                  + " at rest");
    }
    // Every refund reached both accounts: the renter's and the provider's marks say the rental's.
    for (RentalBook r : rentals.values()) {
      if (r.refunded == 0) continue;
      long toRenter = book(r.renterId).refunds.getOrDefault(r.id, 0L);
      long fromProvider = book(r.terms.providerId()).reversals.getOrDefault(r.id, 0L);
      check(
          toRenter == r.refunded && fromProvider == r.refunded,
          "refunds-delivered-at-rest",
          () ->
              r.id
                  + " refunded "
                  + r.refunded
                  + " but its renter has "
                  + toRenter
                  + " and its provider gave back "
                  + fromProvider
                  + " at rest");
    }
    for (SnapshotBook b : snapshots.values())
      check(
          b.deleted && b.closed,
          "snapshots-closed-at-rest",
          () -> b.id + " is still " + (b.deleted ? "closing" : "kept") + " at rest");
    long captured = 0, credited = 0;
    for (AccountBook a : accounts.values()) credited += a.storage; // the platform's storage revenue
    for (Map.Entry<String, Account.Summary> e : summaries.entrySet()) {
      Account.Summary s = e.getValue();
      check(
          s.held() == 0,
          "no-holds-at-rest",
          () -> e.getKey() + " still holds " + s.held() + " at rest");
      captured += s.captured();
      credited += s.credited() + s.platformCredited();
    }
    long c = captured, p = credited;
    check(
        c == p,
        "captured-is-credited-at-rest",
        () -> "captured " + c + " but credited (provider + platform + storage) " + p);
    for (Map.Entry<String, HostBook> e : hosts.entrySet()) {
      for (Map.Entry<String, List<Integer>> held : e.getValue().reservations.entrySet()) {
        RentalBook r = rentals.get(held.getKey());
        boolean own = r != null && r.terms != null && r.terms.hostId().equals(e.getKey());
        // An orphan: cards reserved for a rental that never learned of it (its match answer was
        // lost) or matched elsewhere.
        check(
            false,
            own ? "no-reservations-at-rest" : "no-orphan-reservations-at-rest",
            () ->
                e.getKey()
                    + " still reserves cards "
                    + held.getValue()
                    + " for "
                    + held.getKey()
                    + " at rest"
                    + (own
                        ? ""
                        : " (the rental "
                            + (r == null || r.terms == null
                                ? "never matched"
                                : "matched " + r.terms.hostId())
                            + ")"));
      }
    }
  }

  AccountBook book(String accountId) {
    return accounts.computeIfAbsent(accountId, k -> new AccountBook());
  }
}
