package dev.tickmark.engine.host;

import static dev.tickmark.engine.host.HostDriver.H100;
import static dev.tickmark.engine.host.HostDriver.NEVER;
import static dev.tickmark.engine.host.HostDriver.ON_DEMAND;
import static dev.tickmark.engine.host.HostDriver.OWNER;
import static dev.tickmark.engine.host.HostDriver.REGION;
import static dev.tickmark.engine.host.HostDriver.START;
import static dev.tickmark.engine.host.HostDriver.assertRejected;
import static dev.tickmark.engine.host.HostDriver.ok;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.host.Host.CardView;
import dev.tickmark.engine.host.Host.HostView;
import dev.tickmark.engine.host.Host.Reservation;
import dev.tickmark.engine.host.Host.ToSession;
import dev.tickmark.engine.host.HostDriver.Signed;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.HardwareReport;
import java.security.KeyPair;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.Done;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A card is never reserved twice: the host is the one authority on its cards. Checked against a
 * reference model over a seeded random sequence of reserve / confirm / release, and under
 * concurrent proposals from many matchers at one live (spawned) host actor.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class HostCardsTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("HostCardsTest").withCustomConfig(CONFIG).build();

  private static final int CARDS = 8;

  /** The reference model: what the host must hold for a rental. */
  private record Held(List<Integer> cards, boolean confirmed) {}

  /**
   * Proposals that reached the host together are judged one after another, each on the cards those
   * before it left, and answered as each would have been alone; what they reserve is written in one
   * go.
   */
  /**
   * A host whose agent said it cannot give a rental network (a sandbox without slirp4netns) refuses
   * such a proposal, alone or in a batch, and still takes rentals without network; it keeps saying
   * so after a restart, and shows it.
   */
  @Test
  void aHostThatCannotGiveNetworkRefusesARentalThatAsksForIt() {
    TestClock clock = new TestClock(START);
    HostDriver host = new HostDriver(testKit, HostDriver.settings(NEVER, false), clock, CARDS);
    host.onMarket(new HardwareReport.WorkloadRuntime("sandbox", false));
    assertEquals(
        new Verification.WorkloadRuntime("sandbox", false), host.view().runtime(), "shown");

    var refused = host.propose(r -> withNetwork("net", 1, true, r));
    assertRejected(Rejection.HOST_NOT_AVAILABLE, refused);
    assertEquals(
        "the host cannot give a rental outbound network",
        Rejection.detailOf(refused.reply().getError().getMessage()));

    var batch =
        host.reserveTogether(
            List.of(withNetwork("net-2", 1, true, null), withNetwork("plain", 1, false, null)));
    List<Host.ReservationAnswer> answers = ok(batch).answers();
    assertEquals(Rejection.HOST_NOT_AVAILABLE, Rejection.codeOf(answers.get(0).refusal()));
    assertEquals(List.of(0), answers.get(1).reservation().cards());
    assertEquals(
        List.of("plain"),
        batch.events().stream().map(e -> ((Host.CardsReserved) e).rentalId()).toList());

    host.assertRecovers();
    assertRejected(
        Rejection.HOST_NOT_AVAILABLE, host.propose(r -> withNetwork("net-3", 1, true, r)));
  }

  /** A host that can give network, and one whose agent never said (older agents), take it. */
  @Test
  void aHostThatCanGiveNetworkOrNeverSaidTakesARentalThatAsksForIt() {
    for (HardwareReport.WorkloadRuntime runtime :
        java.util.Arrays.asList(new HardwareReport.WorkloadRuntime("docker", true), null)) {
      TestClock clock = new TestClock(START);
      HostDriver host = new HostDriver(testKit, HostDriver.settings(NEVER, false), clock, CARDS);
      if (runtime == null) host.onMarket();
      else host.onMarket(runtime);
      assertEquals(List.of(0, 1), ok(host.propose(r -> withNetwork("net", 2, true, r))).cards());
    }
  }

  /**
   * A rental that names a runtime (a renter who needs their image run asks for {@code docker}) is
   * refused by a host that runs rentals in another, alone or in a batch, also after a restart; the
   * host that runs it, or a rental that names none, is taken.
   */
  @Test
  void aHostRefusesARentalThatAsksForAnotherRuntime() {
    TestClock clock = new TestClock(START);
    HostDriver host = new HostDriver(testKit, HostDriver.settings(NEVER, false), clock, CARDS);
    host.onMarket(new HardwareReport.WorkloadRuntime("sandbox", true));

    var refused = host.propose(r -> needing("img", new WorkloadNeeds(false, "docker"), r));
    assertRejected(Rejection.HOST_NOT_AVAILABLE, refused);
    assertEquals(
        "the host does not run rentals in docker",
        Rejection.detailOf(refused.reply().getError().getMessage()));

    var batch =
        host.reserveTogether(
            List.of(
                needing("img-2", new WorkloadNeeds(true, "docker"), null),
                needing("boxed", new WorkloadNeeds(true, "sandbox"), null),
                needing("any", WorkloadNeeds.ANY, null)));
    List<Host.ReservationAnswer> answers = ok(batch).answers();
    assertEquals(Rejection.HOST_NOT_AVAILABLE, Rejection.codeOf(answers.get(0).refusal()));
    assertEquals(List.of(0), answers.get(1).reservation().cards());
    assertEquals(List.of(1), answers.get(2).reservation().cards());
    assertEquals(
        "sandbox", answers.get(2).reservation().runtime(), "the rental learns what it runs in");

    host.assertRecovers();
    assertRejected(
        Rejection.HOST_NOT_AVAILABLE,
        host.propose(r -> needing("img-3", new WorkloadNeeds(false, "docker"), r)));
  }

  /** A host whose agent never said how it runs rentals takes none that names a runtime. */
  @Test
  void aHostThatNeverSaidItsRuntimeRefusesARentalThatNamesOne() {
    TestClock clock = new TestClock(START);
    HostDriver host = new HostDriver(testKit, HostDriver.settings(NEVER, false), clock, CARDS);
    host.onMarket();
    assertRejected(
        Rejection.HOST_NOT_AVAILABLE,
        host.propose(r -> needing("img", new WorkloadNeeds(false, "docker"), r)));
    Reservation any = ok(host.propose(r -> needing("any", WorkloadNeeds.ANY, r)));
    assertEquals(List.of(0), any.cards());
    assertNull(any.runtime(), "not said");
  }

  private static Host.ReserveCards withNetwork(
      String rentalId, int count, boolean network, ActorRef<StatusReply<Reservation>> replyTo) {
    return proposal(rentalId, count, new WorkloadNeeds(network, null), replyTo);
  }

  private static Host.ReserveCards needing(
      String rentalId, WorkloadNeeds needs, ActorRef<StatusReply<Reservation>> replyTo) {
    return proposal(rentalId, 1, needs, replyTo);
  }

  private static Host.ReserveCards proposal(
      String rentalId, int count, WorkloadNeeds needs, ActorRef<StatusReply<Reservation>> replyTo) {
    return new Host.ReserveCards(
        rentalId,
        "acc_renter",
        H100,
        count,
        Listing.Tier.ON_DEMAND,
        ON_DEMAND,
        null,
        needs.network(),
        needs.runtime(),
        replyTo);
  }

  @Test
  void proposalsThatArriveTogetherAreJudgedInOrderAndWrittenAtOnce() {
    TestClock clock = new TestClock(START);
    HostDriver host = new HostDriver(testKit, HostDriver.settings(NEVER, false), clock, CARDS);
    host.onMarket();
    assertEquals(List.of(0, 1), ok(host.reserve("earlier", 2)).cards());

    var result =
        host.reserveTogether(
            List.of(
                proposal("a", 3, ON_DEMAND),
                proposal("earlier", 2, ON_DEMAND), // holds its cards already
                proposal("b", 4, ON_DEMAND), // 3 left after a
                proposal("c", 3, ON_DEMAND),
                proposal("d", 1, ON_DEMAND - 1))); // the floor is above its ceiling
    List<Host.ReservationAnswer> answers = ok(result).answers();
    assertEquals(
        List.of("a", "earlier", "b", "c", "d"),
        answers.stream().map(Host.ReservationAnswer::rentalId).toList());
    assertEquals(List.of(2, 3, 4), answers.get(0).reservation().cards());
    assertEquals(clock.instant(), answers.get(0).reservation().reservedAt());
    assertEquals(List.of(0, 1), answers.get(1).reservation().cards());
    assertEquals(null, answers.get(1).reservation().reservedAt(), "not reserved by this answer");
    assertEquals(Rejection.INSUFFICIENT_CARDS, Rejection.codeOf(answers.get(2).refusal()));
    assertEquals("3 free cards, 4 asked", Rejection.detailOf(answers.get(2).refusal()));
    assertEquals(List.of(5, 6, 7), answers.get(3).reservation().cards());
    assertEquals(Rejection.PRICE_ABOVE_CEILING, Rejection.codeOf(answers.get(4).refusal()));
    assertEquals(null, answers.get(4).reservation());

    // One write: the reservations of a and c, nothing for the others.
    assertEquals(
        List.of("a", "c"),
        result.events().stream().map(e -> ((Host.CardsReserved) e).rentalId()).toList());
    Map<String, Set<Integer>> byRental = new HashMap<>();
    for (CardView card : host.view().cards())
      if (card.rentalId() != null)
        byRental.computeIfAbsent(card.rentalId(), r -> new TreeSet<>()).add(card.index());
    assertEquals(
        Map.of("earlier", Set.of(0, 1), "a", Set.of(2, 3, 4), "c", Set.of(5, 6, 7)), byRental);

    // Nothing reserved: nothing written, every refusal answered.
    var full = host.reserveTogether(List.of(proposal("e", 1, ON_DEMAND)));
    assertEquals(List.of(), full.events());
    assertEquals(
        Rejection.INSUFFICIENT_CARDS, Rejection.codeOf(ok(full).answers().get(0).refusal()));
  }

  private static Host.ReserveCards proposal(String rentalId, int count, long maxPrice) {
    return new Host.ReserveCards(rentalId, H100, count, Listing.Tier.ON_DEMAND, maxPrice, null);
  }

  @Test
  void aRandomSequenceOfReservationsNeverGivesACardTwice() {
    HostDriver host =
        new HostDriver(testKit, HostDriver.settings(NEVER, false), new TestClock(START), CARDS);
    host.onMarket();
    Random random = new Random(20250314L);
    Map<String, Held> model = new LinkedHashMap<>();
    Set<String> released = new HashSet<>(); // a host never reserves again for these
    int reserved = 0;
    int refused = 0;

    for (int step = 1; step <= 300; step++) {
      int op = random.nextInt(10);
      // Proposals name any rental (new ones and repeats); ends and confirmations mostly name a live
      // one.
      String rental =
          op >= 4 && !model.isEmpty() && random.nextInt(5) > 0
              ? new ArrayList<>(model.keySet()).get(random.nextInt(model.size()))
              : "r" + random.nextInt(14) + "-" + step / 30; // fresh ids now and then
      if (op < 4) {
        int count =
            random.nextInt(20) == 0
                ? random.nextInt(3) * 9 - 9
                : 1 + random.nextInt(4); // now and then -9, 0 or 9
        var result = host.reserve(rental, count);
        Held before = model.get(rental);
        int free = CARDS - model.values().stream().mapToInt(h -> h.cards().size()).sum();
        if (before == null && released.contains(rental)) {
          assertRejected(Rejection.HOST_NOT_AVAILABLE, result);
          refused++;
        } else if (before != null) {
          Reservation r = ok(result);
          assertEquals(before.cards(), r.cards(), "a repeated proposal answers the same cards");
          assertEquals(before.confirmed(), r.confirmed());
          assertTrue(result.hasNoEvents());
        } else if (count >= 1 && count <= free) {
          Reservation r = ok(result);
          assertEquals(count, r.cards().size());
          Set<Integer> taken = new HashSet<>();
          model.values().forEach(h -> taken.addAll(h.cards()));
          for (int card : r.cards()) {
            assertFalse(
                taken.contains(card),
                "step " + step + ": card " + card + " given to " + rental + " is already taken");
            assertTrue(card >= 0 && card < CARDS);
          }
          model.put(rental, new Held(r.cards(), false));
          reserved++;
        } else {
          assertRejected(Rejection.INSUFFICIENT_CARDS, result);
          refused++;
        }
      } else if (op
          < 8) { // ends are as frequent as proposals, so the host is often but not always full
        var result = host.release(rental);
        assertTrue(result.reply().isSuccess());
        Held before = model.remove(rental);
        // A release is recorded once, also one that found nothing (it may precede its proposal).
        assertEquals(released.add(rental) ? 1 : 0, result.events().size());
      } else {
        var result = host.confirm(rental);
        Held before = model.get(rental);
        if (before == null) {
          assertRejected(Rejection.NOT_FOUND, result);
        } else {
          Reservation r = ok(result);
          assertTrue(r.confirmed());
          assertEquals(before.cards(), r.cards());
          assertEquals(before.confirmed() ? 0 : 1, result.events().size());
          model.put(rental, new Held(before.cards(), true));
        }
      }
      assertConsistent(host, model, step);
      if (step % 75 == 0)
        host.assertRecovers(); // later ones from a snapshot (every 100 events) and the events after
      // it
    }
    int r = reserved, f = refused;
    assertTrue(
        reserved > 40 && refused > 15,
        () -> "the sequence should exercise both outcomes: " + r + " reserved, " + f + " refused");
  }

  /**
   * After every step: the host's reservations are the model's, pairwise disjoint, within its cards,
   * and its view agrees.
   */
  private static void assertConsistent(HostDriver host, Map<String, Held> model, int step) {
    Host.Active state = host.enrolled();
    Set<Integer> hostCards = new HashSet<>();
    state.inventory().cards().forEach(c -> hostCards.add(c.index()));
    Set<Integer> seen = new HashSet<>();
    Map<String, Held> actual = new HashMap<>();
    state
        .reservations()
        .forEach(
            (rental, held) -> {
              for (int card : held.cards()) {
                assertTrue(
                    hostCards.contains(card),
                    "step " + step + ": card " + card + " is not one of the host's");
                assertTrue(
                    seen.add(card),
                    "step "
                        + step
                        + ": card "
                        + card
                        + " is reserved twice: "
                        + state.reservations());
              }
              actual.put(rental, new Held(held.cards(), held.confirmed()));
            });
    assertEquals(model, actual, "step " + step);
    assertEquals(CARDS - seen.size(), state.freeCards().size());

    HostView view = host.view();
    assertEquals(CARDS, view.cards().size());
    for (CardView card : view.cards()) {
      String owner = null;
      for (var e : model.entrySet()) {
        if (e.getValue().cards().contains(card.index())) owner = e.getKey();
      }
      String expected =
          owner == null ? "free" : model.get(owner).confirmed() ? "rented" : "reserved";
      assertEquals(expected, card.state(), "step " + step + ": card " + card.index());
      assertEquals(owner, card.rentalId(), "step " + step + ": card " + card.index());
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Concurrent proposals at one live host

  @Test
  void concurrentProposalsFromManyMatchersNeverShareACard() throws Exception {
    String hostId = HostDriver.nextHostId();
    TestClock clock = new TestClock(START);
    ActorRef<Host.Command> host =
        testKit.spawn(Host.create(hostId, HostDriver.settings(NEVER, false), clock), hostId);
    KeyPair key = Ed25519.generate();
    String tokenHash = Host.sha256("tmkreg-concurrent");

    TestProbe<StatusReply<Done>> done = testKit.createTestProbe();
    host.tell(
        new Host.Invite(
            OWNER, REGION, null, tokenHash, START.plus(Duration.ofHours(24)), done.getRef()));
    assertTrue(done.receiveMessage().isSuccess());
    TestProbe<StatusReply<Host.Registration>> registration = testKit.createTestProbe();
    host.tell(
        new Host.Register(tokenHash, Ed25519.encodePublic(key.getPublic()), registration.getRef()));
    assertTrue(registration.receiveMessage().isSuccess());
    TestProbe<ToSession> session = testKit.createTestProbe();
    TestProbe<StatusReply<Host.Attached>> attached = testKit.createTestProbe();
    host.tell(new Host.Attach(session.getRef(), attached.getRef()));
    assertTrue(attached.receiveMessage().isSuccess());
    Signed report = HostDriver.sign(HostDriver.report(CARDS, false), key.getPrivate());
    TestProbe<StatusReply<Verification.Outcome>> outcome = testKit.createTestProbe();
    host.tell(
        new Host.VerifyReport(
            session.getRef(),
            report.report(),
            report.canonical(),
            report.signature(),
            outcome.getRef()));
    assertTrue(outcome.receiveMessage().getValue().passed());
    TestProbe<StatusReply<HostView>> views = testKit.createTestProbe();
    host.tell(new Host.UpdateListing(OWNER, HostDriver.listed(), views.getRef()));
    assertTrue(views.receiveMessage().getValue().listed());

    int matchers = 6;
    int perMatcher = 25;
    List<TestProbe<StatusReply<Reservation>>> probes = new ArrayList<>();
    for (int m = 0; m < matchers; m++) probes.add(testKit.createTestProbe());
    Random random = new Random(7L);
    int[][] counts = new int[matchers][perMatcher];
    for (int[] row : counts) for (int i = 0; i < perMatcher; i++) row[i] = 1 + random.nextInt(3);

    // Round 1: every matcher proposes at once; some proposals name the same rental (a matcher retry
    // racing another).
    fire(
        matchers,
        m -> {
          for (int i = 0; i < perMatcher; i++) {
            String rental = i % 5 == 0 ? "shared-" + i : "m" + m + "-" + i;
            host.tell(
                new Host.ReserveCards(
                    rental,
                    H100,
                    counts[m][i],
                    Listing.Tier.ON_DEMAND,
                    ON_DEMAND,
                    probes.get(m).getRef()));
          }
        });
    Map<String, List<Integer>> live = new HashMap<>();
    collect(probes, perMatcher, live);
    assertDisjoint(live);
    assertFalse(live.isEmpty());

    // Round 2: half the rentals end while new proposals race in.
    List<String> ending =
        live.keySet().stream().sorted().filter(r -> r.hashCode() % 2 == 0).toList();
    TestProbe<StatusReply<Done>> releases = testKit.createTestProbe();
    fire(
        matchers,
        m -> {
          if (m == 0) ending.forEach(r -> host.tell(new Host.ReleaseCards(r, releases.getRef())));
          for (int i = 0; i < perMatcher; i++) {
            host.tell(
                new Host.ReserveCards(
                    "late-m" + m + "-" + i,
                    H100,
                    counts[m][i],
                    Listing.Tier.ON_DEMAND,
                    ON_DEMAND,
                    probes.get(m).getRef()));
          }
        });
    for (int i = 0; i < ending.size(); i++) assertTrue(releases.receiveMessage().isSuccess());
    ending.forEach(live::remove);
    collect(probes, perMatcher, live);
    assertDisjoint(live);

    // The host's own view names exactly the live reservations.
    host.tell(new Host.Get(null, views.getRef()));
    HostView view = views.receiveMessage().getValue();
    Map<String, Set<Integer>> byRental = new HashMap<>();
    for (CardView card : view.cards()) {
      if (card.rentalId() != null)
        byRental.computeIfAbsent(card.rentalId(), r -> new TreeSet<>()).add(card.index());
    }
    Map<String, Set<Integer>> expected = new HashMap<>();
    live.forEach((rental, cards) -> expected.put(rental, new TreeSet<>(cards)));
    assertEquals(expected, byRental);
    testKit.stop(host);
  }

  private interface Matcher {
    void run(int matcher) throws Exception;
  }

  /** Runs each matcher on its own thread, all released at once. */
  private static void fire(int matchers, Matcher body) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(matchers);
    CountDownLatch go = new CountDownLatch(1);
    List<java.util.concurrent.Future<?>> futures = new ArrayList<>();
    for (int m = 0; m < matchers; m++) {
      int matcher = m;
      futures.add(
          pool.submit(
              () -> {
                go.await();
                body.run(matcher);
                return null;
              }));
    }
    go.countDown();
    for (var f : futures) f.get(10, TimeUnit.SECONDS);
    pool.shutdown();
  }

  /**
   * Takes every answer; a rental answered twice (a shared proposal) must get the same cards both
   * times.
   */
  private static void collect(
      List<TestProbe<StatusReply<Reservation>>> probes, int each, Map<String, List<Integer>> live) {
    for (TestProbe<StatusReply<Reservation>> probe : probes) {
      for (int i = 0; i < each; i++) {
        StatusReply<Reservation> reply = probe.receiveMessage(Duration.ofSeconds(10));
        if (reply.isError()) {
          assertEquals(
              Rejection.INSUFFICIENT_CARDS,
              Rejection.codeOf(reply.getError().getMessage()),
              reply.getError().getMessage());
          continue;
        }
        Reservation r = reply.getValue();
        List<Integer> previous = live.putIfAbsent(r.rentalId(), r.cards());
        if (previous != null && !previous.equals(r.cards())) {
          fail(r.rentalId() + " was answered " + previous + " and then " + r.cards());
        }
      }
    }
  }

  private static void assertDisjoint(Map<String, List<Integer>> live) {
    Map<Integer, String> owner = new HashMap<>();
    live.forEach(
        (rental, cards) ->
            cards.forEach(
                card -> {
                  assertTrue(card >= 0 && card < CARDS, "card " + card);
                  String other = owner.putIfAbsent(card, rental);
                  assertTrue(
                      other == null,
                      () ->
                          "card " + card + " is in two reservations: " + other + " and " + rental);
                }));
  }
}
