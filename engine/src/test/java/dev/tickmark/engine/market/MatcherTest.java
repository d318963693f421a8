package dev.tickmark.engine.market;

import static dev.tickmark.engine.market.MarketHost.GPU;
import static dev.tickmark.engine.market.MarketHost.REGION;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.TestClock;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.WorkloadNeeds;
import dev.tickmark.engine.market.Matcher.Candidate;
import dev.tickmark.engine.market.Matcher.Match;
import java.sql.SQLTransientConnectionException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The {@link Matcher}: candidate order, moving on after a refusal, several requests at once, and —
 * with REAL {@link Host} entities, the one authority on their cards — no card ever given to two
 * rentals.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class MatcherTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("MatcherTest").withCustomConfig(CONFIG).build();

  private static final Duration WAIT = Duration.ofSeconds(5);
  private static final long CEILING = 3_000_000;
  private static final AtomicInteger IDS = new AtomicInteger();

  /** Host probes by id, each answering what the test tells it to. */
  private final class Hosts {
    final Map<String, TestProbe<Host.Command>> probes = new HashMap<>();

    Hosts(String... ids) {
      for (String id : ids) probes.put(id, testKit.createTestProbe());
    }

    RecipientRef<Host.Command> ref(String id) {
      TestProbe<Host.Command> probe = probes.get(id);
      return probe == null ? testKit.system().deadLetters() : probe.getRef();
    }

    Host.ReserveCards expectProposal(String id) {
      return probes.get(id).expectMessageClass(Host.ReserveCards.class, WAIT);
    }

    void expectNoProposal(Duration within) {
      probes.values().forEach(p -> p.expectNoMessage(within));
    }
  }

  private ActorRef<Matcher.Command> matcher(
      List<Candidate> candidates, Hosts hosts, Duration askTimeout) {
    return testKit.spawn(
        Matcher.create(
            (gpu, region, tier, max, count, renter, needs, held) ->
                CompletableFuture.completedFuture(candidates),
            hosts::ref,
            askTimeout));
  }

  private static final Instant T0 = Instant.parse("2026-12-05T06:00:00Z");
  private static final Instant T1 = T0.plusSeconds(1);

  private static Host.Reservation reservation(
      String hostId, String rentalId, List<Integer> cards, long floor, Instant reservedAt) {
    return new Host.Reservation(
        hostId,
        "provider-" + hostId,
        rentalId,
        cards,
        floor,
        Listing.Tier.ON_DEMAND,
        false,
        false,
        REGION,
        reservedAt);
  }

  private static Host.Reservation reservation(
      String hostId, String rentalId, List<Integer> cards, long floor) {
    return reservation(hostId, rentalId, cards, floor, null);
  }

  private static <T> StatusReply<T> refused(Rejection code) {
    return Rejection.reply(code, "refused by the test");
  }

  private static String rentalId() {
    return "rental-m" + IDS.incrementAndGet();
  }

  // ---------------------------------------------------------------------------------------------

  @Test
  void ordersCandidatesByFloorThenMostFreeCardsThenId() {
    List<Candidate> candidates =
        List.of(
            new Candidate("h-c", 2_000_000, 2),
            new Candidate("h-b", 1_500_000, 8),
            new Candidate("h-a", 2_000_000, 2),
            new Candidate("h-d", 2_000_000, 4),
            new Candidate("h-e", 2_500_000, 8),
            new Candidate("h-f", 1_500_000, 1));
    assertEquals(
        List.of("h-b", "h-f", "h-d", "h-a", "h-c", "h-e"),
        Matcher.ordered(candidates).stream().map(Candidate::hostId).toList());
    assertEquals(List.of(), Matcher.ordered(List.of()));
  }

  /**
   * DESIGN.md: "Pick the lowest floor; break ties by reliability, then deterministically". The
   * floor always wins; among equal floors the smaller share of ended rentals lost goes first, then
   * the longer record, and only then the free cards and the id.
   */
  @Test
  void breaksTiesBetweenEqualFloorsByReliabilityBeforeFreeCards() {
    List<Candidate> candidates =
        List.of(
            // lost 1 of 4: the least reliable of the equal floors, though it has the most cards
            new Candidate("h-lossy", 2_000_000, 8, null, new Reliability(4, 1)),
            // never lost one, in a record of 50
            new Candidate("h-proven", 2_000_000, 1, null, new Reliability(50, 0)),
            // no record yet: nothing lost, but nothing shown
            new Candidate("h-new", 2_000_000, 4, null, Reliability.NONE),
            // lost 1 of 40: a smaller share than h-lossy's
            new Candidate("h-rare", 2_000_000, 8, null, new Reliability(40, 1)),
            // the cheapest wins whatever its record
            new Candidate("h-cheap", 1_900_000, 1, null, new Reliability(3, 3)),
            // equal to h-new in all but cards and id
            new Candidate("h-new2", 2_000_000, 4, null, Reliability.NONE));
    assertEquals(
        List.of("h-cheap", "h-proven", "h-new", "h-new2", "h-rare", "h-lossy"),
        Matcher.ordered(candidates).stream().map(Candidate::hostId).toList());
  }

  @Test
  void proposesToTheMoreReliableOfTwoEqualFloorsFirst() {
    Hosts hosts = new Hosts("h-lossy", "h-clean");
    ActorRef<Matcher.Command> matcher =
        matcher(
            List.of(
                new Candidate("h-lossy", 2_000_000, 8, null, new Reliability(10, 2)),
                new Candidate("h-clean", 2_000_000, 2, null, new Reliability(10, 0))),
            hosts,
            WAIT);
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String rentalId = rentalId();
    matcher.tell(
        new Match(
            rentalId, GPU, 1, Listing.Tier.ON_DEMAND, REGION, CEILING, null, replyTo.getRef()));
    Host.Reservation clean = reservation("h-clean", rentalId, List.of(0), 2_000_000);
    hosts.expectProposal("h-clean").replyTo().tell(StatusReply.success(clean));
    assertEquals(new Matcher.Matched(rentalId, clean), replyTo.receiveMessage(WAIT));
    hosts.expectNoProposal(Duration.ofMillis(100));
  }

  @Test
  void proposesInCandidateOrderAndMovesOnAfterEachRefusal() {
    Hosts hosts = new Hosts("h-a", "h-b", "h-c", "h-d");
    ActorRef<Matcher.Command> matcher =
        matcher(
            List.of(
                new Candidate("h-c", 2_500_000, 8),
                new Candidate("h-a", 2_000_000, 2),
                new Candidate("h-b", 2_000_000, 4),
                new Candidate("h-d", 2_000_000, 4)),
            hosts,
            WAIT);
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String rentalId = rentalId();
    matcher.tell(
        new Match(
            rentalId, GPU, 2, Listing.Tier.ON_DEMAND, REGION, CEILING, null, replyTo.getRef()));

    Host.ReserveCards first = hosts.expectProposal("h-b");
    assertEquals(
        new Host.ReserveCards(rentalId, GPU, 2, Listing.Tier.ON_DEMAND, CEILING, first.replyTo()),
        first);
    first.replyTo().tell(refused(Rejection.INSUFFICIENT_CARDS));
    hosts.expectProposal("h-d").replyTo().tell(refused(Rejection.HOST_NOT_AVAILABLE));
    Host.Reservation atFloor = reservation("h-a", rentalId, List.of(0, 1), 2_000_000);
    hosts.expectProposal("h-a").replyTo().tell(StatusReply.success(atFloor));

    assertEquals(new Matcher.Matched(rentalId, atFloor), replyTo.receiveMessage(WAIT));
    hosts.expectNoProposal(Duration.ofMillis(100)); // h-c, the dearest, is never asked
  }

  /**
   * The read side lags behind the cards the matcher gives out; the query is told which cards the
   * matcher holds, proposed (no answer yet) or given (when), so that it can look past the hosts
   * they fill instead of offering only hosts that are full already.
   */
  /**
   * A rental that asks for network, or for a runtime by name, is matched only among hosts that can
   * run it: the read side is asked for those, and the host is told, so that one whose agent said
   * otherwise refuses even when the read side lags. A rental that asks neither asks for all.
   */
  @Test
  void aRentalWithNeedsAsksForHostsThatMeetThemAndTellsTheHost() {
    Hosts hosts = new Hosts("h-a");
    List<WorkloadNeeds> asked = new java.util.concurrent.CopyOnWriteArrayList<>();
    ActorRef<Matcher.Command> matcher =
        testKit.spawn(
            Matcher.create(
                (gpu, region, tier, max, count, renter, needs, held) -> {
                  asked.add(needs);
                  return CompletableFuture.completedFuture(List.of(new Candidate("h-a", 1, 4)));
                },
                hosts::ref,
                WAIT));
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    List<WorkloadNeeds> needed =
        List.of(
            new WorkloadNeeds(true, null),
            new WorkloadNeeds(false, "docker"),
            new WorkloadNeeds(true, "sandbox"),
            WorkloadNeeds.ANY);
    for (WorkloadNeeds needs : needed) {
      String rental = rentalId();
      matcher.tell(
          new Match(
              rental,
              "acc_renter",
              GPU,
              1,
              Listing.Tier.ON_DEMAND,
              null,
              CEILING,
              null,
              null,
              needs.network(),
              needs.runtime(),
              replyTo.getRef()));
      Host.ReserveCards proposal = hosts.expectProposal("h-a");
      assertEquals(needs, proposal.needs(), "the host is told");
      proposal.replyTo().tell(StatusReply.success(reservation("h-a", rental, List.of(0), 1, T1)));
      assertInstanceOf(Matcher.Matched.class, replyTo.receiveMessage(WAIT));
    }
    assertEquals(needed, asked, "the read side is asked accordingly");
  }

  @Test
  void tellsTheReadSideWhichCardsItHoldsThatItMayNotShowYet() {
    Hosts hosts = new Hosts("h-a", "h-b");
    List<Matcher.Holdings> heldAsked = new java.util.concurrent.CopyOnWriteArrayList<>();
    ActorRef<Matcher.Command> matcher =
        testKit.spawn(
            Matcher.create(
                (gpu, region, tier, max, count, renter, needs, held) -> {
                  heldAsked.add(held);
                  return CompletableFuture.completedFuture(
                      List.of(new Candidate("h-a", 1, 4), new Candidate("h-b", 2, 4)));
                },
                hosts::ref,
                WAIT));
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String first = rentalId();
    matcher.tell(
        new Match(first, GPU, 3, Listing.Tier.ON_DEMAND, null, CEILING, null, replyTo.getRef()));
    Host.ReserveCards proposal = hosts.expectProposal("h-a");
    assertEquals(List.of(Matcher.Holdings.NONE), heldAsked, "nothing held before");

    // While h-a has not answered, its 3 cards count as held, whatever the read side's instant.
    String second = rentalId();
    matcher.tell(
        new Match(second, GPU, 1, Listing.Tier.ON_DEMAND, null, CEILING, null, replyTo.getRef()));
    replyTo.awaitAssert(
        WAIT,
        () -> {
          assertEquals(2, heldAsked.size());
          return null;
        });
    assertEquals(3, heldAsked.get(1).beyond("h-a", Instant.MAX));
    assertEquals(0, heldAsked.get(1).beyond("h-b", null));

    // Given: held until a read side updated at or after the reservation shows it.
    proposal
        .replyTo()
        .tell(StatusReply.success(reservation("h-a", first, List.of(0, 1, 2), 1, T1)));
    // The second, proposed to h-a meanwhile, goes once h-a has answered the first.
    hosts.expectProposal("h-a").replyTo().tell(refused(Rejection.INSUFFICIENT_CARDS));
    hosts
        .expectProposal("h-b")
        .replyTo()
        .tell(StatusReply.success(reservation("h-b", second, List.of(0), 2, T1)));
    replyTo.receiveMessage(WAIT);
    replyTo.receiveMessage(WAIT);
    matcher.tell(
        new Match(
            rentalId(), GPU, 1, Listing.Tier.ON_DEMAND, null, CEILING, null, replyTo.getRef()));
    hosts.expectProposal("h-a");
    Matcher.Holdings third = heldAsked.get(2);
    assertEquals(3, third.beyond("h-a", T1.minusMillis(1)), "the read side before it");
    assertEquals(0, third.beyond("h-a", T1), "the read side showing it");
    assertEquals(1, third.beyond("h-b", T1.minusMillis(1)));
  }

  /**
   * Once the read side shows the cards a host gave, they are not counted again: the cheapest host's
   * last free card goes to the next request, not a dearer host's.
   */
  @Test
  void keepsTheLowestFloorOnceTheReadSideShowsTheCardsGiven() {
    Hosts hosts = new Hosts("h-a", "h-b");
    java.util.concurrent.atomic.AtomicReference<List<Candidate>> readSide =
        new java.util.concurrent.atomic.AtomicReference<>(
            List.of(new Candidate("h-a", 1, 2, T0), new Candidate("h-b", 2, 4, T0)));
    ActorRef<Matcher.Command> matcher =
        testKit.spawn(
            Matcher.create(
                (gpu, region, tier, max, count, renter, needs, held) ->
                    CompletableFuture.completedFuture(readSide.get()),
                hosts::ref,
                WAIT));
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String first = rentalId();
    matcher.tell(
        new Match(first, GPU, 1, Listing.Tier.ON_DEMAND, null, CEILING, null, replyTo.getRef()));
    hosts
        .expectProposal("h-a")
        .replyTo()
        .tell(StatusReply.success(reservation("h-a", first, List.of(0), 1, T1)));
    assertInstanceOf(Matcher.Matched.class, replyTo.receiveMessage(WAIT));

    // The host projection has caught up: h-a shows 1 card free, as of the reservation.
    readSide.set(List.of(new Candidate("h-a", 1, 1, T1), new Candidate("h-b", 2, 4, T1)));
    String second = rentalId();
    matcher.tell(
        new Match(second, GPU, 1, Listing.Tier.ON_DEMAND, null, CEILING, null, replyTo.getRef()));
    hosts
        .expectProposal("h-a")
        .replyTo()
        .tell(StatusReply.success(reservation("h-a", second, List.of(1), 1, T1.plusMillis(5))));
    assertEquals("h-a", ((Matcher.Matched) replyTo.receiveMessage(WAIT)).reservation().hostId());
    hosts.expectNoProposal(Duration.ofMillis(100));
  }

  @Test
  void answersNoMatchWhenEveryCandidateRefuses() {
    Hosts hosts = new Hosts("h-a", "h-b");
    ActorRef<Matcher.Command> matcher =
        matcher(List.of(new Candidate("h-a", 1, 1), new Candidate("h-b", 2, 1)), hosts, WAIT);
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String rentalId = rentalId();
    matcher.tell(
        new Match(rentalId, GPU, 1, Listing.Tier.SPOT, null, CEILING, null, replyTo.getRef()));
    // h-b had not the cards the read side showed: the candidates are read once more, not again.
    for (int read = 1; read <= Matcher.MAX_READS; read++) {
      hosts.expectProposal("h-a").replyTo().tell(refused(Rejection.PRICE_ABOVE_CEILING));
      hosts.expectProposal("h-b").replyTo().tell(refused(Rejection.INSUFFICIENT_CARDS));
    }
    Matcher.NoMatch noMatch = assertInstanceOf(Matcher.NoMatch.class, replyTo.receiveMessage(WAIT));
    assertEquals(rentalId, noMatch.rentalId());
    hosts.expectNoProposal(Duration.ofMillis(100));
  }

  /**
   * A host that has not the cards the read side showed means the read side is behind: the request
   * reads its candidates once more, past what the matcher now holds, before it answers no capacity.
   * Refusals for any other reason (a price, availability) say nothing of the read side's lag.
   */
  @Test
  void readsTheCandidatesAgainAfterAHostHadNotTheCardsTheReadSideShowed() {
    Hosts hosts = new Hosts("h-a", "h-b");
    AtomicInteger queries = new AtomicInteger();
    ActorRef<Matcher.Command> matcher =
        testKit.spawn(
            Matcher.create(
                (gpu, region, tier, max, count, renter, needs, held) ->
                    CompletableFuture.completedFuture(
                        queries.incrementAndGet() == 1
                            ? List.of(new Candidate("h-a", 1, 1))
                            : List.of(new Candidate("h-b", 2, 1))),
                hosts::ref,
                WAIT));
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String rentalId = rentalId();
    matcher.tell(
        new Match(rentalId, GPU, 1, Listing.Tier.ON_DEMAND, null, CEILING, null, replyTo.getRef()));
    hosts.expectProposal("h-a").replyTo().tell(refused(Rejection.INSUFFICIENT_CARDS));
    Host.Reservation atB = reservation("h-b", rentalId, List.of(0), 2);
    hosts.expectProposal("h-b").replyTo().tell(StatusReply.success(atB));
    assertEquals(new Matcher.Matched(rentalId, atB), replyTo.receiveMessage(WAIT));
    assertEquals(2, queries.get());

    // Refused for its price: no second read.
    String other = rentalId();
    queries.set(0);
    matcher.tell(
        new Match(other, GPU, 1, Listing.Tier.ON_DEMAND, null, CEILING, null, replyTo.getRef()));
    hosts.expectProposal("h-a").replyTo().tell(refused(Rejection.PRICE_ABOVE_CEILING));
    assertInstanceOf(Matcher.NoMatch.class, replyTo.receiveMessage(WAIT));
    assertEquals(1, queries.get());
  }

  @Test
  void answersNoMatchWithoutCandidates() {
    Hosts hosts = new Hosts();
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    ActorRef<Matcher.Command> empty = matcher(List.of(), hosts, WAIT);
    empty.tell(
        new Match(
            "r-empty", GPU, 1, Listing.Tier.ON_DEMAND, REGION, CEILING, null, replyTo.getRef()));
    assertEquals(
        "r-empty",
        assertInstanceOf(Matcher.NoMatch.class, replyTo.receiveMessage(WAIT)).rentalId());
  }

  @Test
  void
      aFailedCandidateQueryIsAnsweredUnavailableNotNoMatchAndTheRequestMatchesOnceTheReadSideRecovers() {
    Hosts hosts = new Hosts("h-a");
    AtomicBoolean readSideDown = new AtomicBoolean(true);
    ActorRef<Matcher.Command> matcher =
        testKit.spawn(
            Matcher.create(
                (gpu, region, tier, max, count, renter, needs, held) ->
                    readSideDown.get()
                        ? CompletableFuture.failedFuture(
                            new SQLTransientConnectionException(
                                "the database was unreachable moments ago"))
                        : CompletableFuture.completedFuture(List.of(new Candidate("h-a", 1, 4))),
                hosts::ref,
                WAIT));
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String rentalId = rentalId();
    Match match =
        new Match(
            rentalId,
            GPU,
            1,
            Listing.Tier.ON_DEMAND,
            REGION,
            CEILING,
            Instant.now().plusSeconds(30),
            replyTo.getRef());

    // An outage says nothing about capacity: the rental must not hear "no candidates".
    matcher.tell(match);
    Matcher.Result during = replyTo.receiveMessage(WAIT);
    assertInstanceOf(Matcher.Unavailable.class, during, () -> "a failed query answered " + during);
    assertEquals(rentalId, ((Matcher.Unavailable) during).rentalId());
    hosts.expectNoProposal(Duration.ofMillis(100));
    // The rental asks again while it lasts; the matcher keeps serving and keeps saying so.
    matcher.tell(match);
    assertInstanceOf(Matcher.Unavailable.class, replyTo.receiveMessage(WAIT));

    readSideDown.set(false);
    matcher.tell(match);
    Host.Reservation reserved = reservation("h-a", rentalId, List.of(0), 1);
    hosts.expectProposal("h-a").replyTo().tell(StatusReply.success(reserved));
    assertEquals(new Matcher.Matched(rentalId, reserved), replyTo.receiveMessage(WAIT));
  }

  @Test
  void silentHostIsSkippedAfterTheAskTimeout() {
    Hosts hosts = new Hosts("h-slow", "h-ok");
    ActorRef<Matcher.Command> matcher =
        matcher(
            List.of(new Candidate("h-slow", 1, 4), new Candidate("h-ok", 2, 4)),
            hosts,
            Duration.ofMillis(300));
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String rentalId = rentalId();
    matcher.tell(
        new Match(
            rentalId, GPU, 1, Listing.Tier.ON_DEMAND, REGION, CEILING, null, replyTo.getRef()));
    hosts.expectProposal("h-slow"); // never answered
    // It may still reserve late: the matcher takes that back, after the proposal, so nothing leaks.
    assertEquals(
        rentalId,
        hosts.probes.get("h-slow").expectMessageClass(Host.ReleaseCards.class, WAIT).rentalId());
    Host.Reservation ok = reservation("h-ok", rentalId, List.of(3), 2);
    hosts.expectProposal("h-ok").replyTo().tell(StatusReply.success(ok));
    assertEquals(new Matcher.Matched(rentalId, ok), replyTo.receiveMessage(WAIT));
  }

  @Test
  void matchesConcurrentRequestsAtOnceAndSteersThemToHostsThatStillLookFree() {
    Hosts hosts = new Hosts("h-a", "h-b", "h-c");
    ActorRef<Matcher.Command> matcher =
        matcher(
            List.of(
                new Candidate("h-a", 1, 2), new Candidate("h-b", 2, 2), new Candidate("h-c", 3, 2)),
            hosts,
            WAIT);
    TestProbe<Matcher.Result> first = testKit.createTestProbe();
    TestProbe<Matcher.Result> second = testKit.createTestProbe();
    TestProbe<Matcher.Result> third = testKit.createTestProbe();
    matcher.tell(
        new Match("r-1", GPU, 2, Listing.Tier.ON_DEMAND, REGION, CEILING, null, first.getRef()));
    matcher.tell(
        new Match("r-2", GPU, 2, Listing.Tier.ON_DEMAND, REGION, CEILING, null, second.getRef()));

    // r-2 does not wait for r-1's answer, and does not queue behind r-1's proposal for h-a's two
    // cards.
    Host.ReserveCards p1 = hosts.expectProposal("h-a");
    Host.ReserveCards p2 = hosts.expectProposal("h-b");
    assertEquals("r-1", p1.rentalId());
    assertEquals("r-2", p2.rentalId());
    p2.replyTo().tell(StatusReply.success(reservation("h-b", "r-2", List.of(0, 1), 2)));
    assertEquals(
        "r-2", assertInstanceOf(Matcher.Matched.class, second.receiveMessage(WAIT)).rentalId());
    p1.replyTo().tell(StatusReply.success(reservation("h-a", "r-1", List.of(0, 1), 1)));
    assertEquals(
        "r-1", assertInstanceOf(Matcher.Matched.class, first.receiveMessage(WAIT)).rentalId());

    // The read side still shows h-a and h-b free; the matcher knows better and goes to h-c first.
    matcher.tell(
        new Match("r-3", GPU, 2, Listing.Tier.ON_DEMAND, REGION, CEILING, null, third.getRef()));
    Host.ReserveCards p3 = hosts.expectProposal("h-c");
    p3.replyTo().tell(refused(Rejection.INSUFFICIENT_CARDS));
    // A guess never turns a request away: the hosts that look taken are still asked, cheapest
    // first.
    hosts.expectProposal("h-a").replyTo().tell(refused(Rejection.INSUFFICIENT_CARDS));
    hosts.expectProposal("h-b").replyTo().tell(refused(Rejection.INSUFFICIENT_CARDS));
    // The read side was behind: read once more (it still offers the same), then give up.
    for (String host : List.of("h-c", "h-a", "h-b"))
      hosts.expectProposal(host).replyTo().tell(refused(Rejection.INSUFFICIENT_CARDS));
    assertInstanceOf(Matcher.NoMatch.class, third.receiveMessage(WAIT));
  }

  /**
   * Requests of one card each, with {@code cheap} (8 free) then {@code dear} (8 free) as
   * candidates: the first is proposed to {@code cheap}, and the others have read their candidates
   * (and so chosen {@code cheap}) before it answers. Returns the first proposal.
   */
  private Host.ReserveCards requestsAtOneHost(
      Hosts hosts,
      String cheap,
      String dear,
      Duration askTimeout,
      List<String> rentalIds,
      TestProbe<Matcher.Result> replyTo) {
    AtomicInteger queries = new AtomicInteger();
    ActorRef<Matcher.Command> matcher =
        testKit.spawn(
            Matcher.create(
                (gpu, region, tier, max, count, renter, needs, held) -> {
                  queries.incrementAndGet();
                  return CompletableFuture.completedFuture(
                      List.of(new Candidate(cheap, 1, 8), new Candidate(dear, 2, 8)));
                },
                hosts::ref,
                askTimeout));
    for (int i = 0; i < rentalIds.size(); i++)
      matcher.tell(
          new Match(
              rentalIds.get(i),
              GPU,
              1,
              Listing.Tier.ON_DEMAND,
              null,
              CEILING,
              null,
              replyTo.getRef()));
    Host.ReserveCards first = hosts.expectProposal(cheap);
    assertEquals(rentalIds.get(0), first.rentalId());
    replyTo.awaitAssert(
        WAIT,
        () -> {
          assertEquals(rentalIds.size(), queries.get());
          return null;
        });
    return first;
  }

  /**
   * A host writes each reservation before it answers. Proposals made to it meanwhile wait in the
   * matcher and go together once it answers, in the order they were made, each answered on its own:
   * one refused moves on to the next candidate as a proposal alone would.
   */
  @Test
  void sendsTheProposalsMadeWhileAHostAnswersTogether() {
    Hosts hosts = new Hosts("h-a", "h-b");
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String first = rentalId();
    String second = rentalId();
    String third = rentalId();
    Host.ReserveCards p1 =
        requestsAtOneHost(hosts, "h-a", "h-b", WAIT, List.of(first, second, third), replyTo);
    hosts.probes.get("h-a").expectNoMessage(Duration.ofMillis(100)); // they wait for its answer

    p1.replyTo().tell(StatusReply.success(reservation("h-a", first, List.of(0), 1, T1)));
    Host.ReserveCardsBatch together =
        hosts.probes.get("h-a").expectMessageClass(Host.ReserveCardsBatch.class, WAIT);
    assertEquals(
        List.of(second, third),
        together.proposals().stream().map(Host.ReserveCards::rentalId).toList());
    together
        .replyTo()
        .tell(
            StatusReply.success(
                new Host.Reservations(
                    List.of(
                        new Host.ReservationAnswer(
                            second, reservation("h-a", second, List.of(1), 1, T1), null),
                        new Host.ReservationAnswer(
                            third, null, "insufficient_cards: refused by the test")))));
    Host.ReserveCards p3 = hosts.expectProposal("h-b");
    assertEquals(third, p3.rentalId());
    p3.replyTo().tell(StatusReply.success(reservation("h-b", third, List.of(0), 2, T1)));

    Map<String, String> hostOf = new HashMap<>();
    for (int i = 0; i < 3; i++) {
      Matcher.Matched m = assertInstanceOf(Matcher.Matched.class, replyTo.receiveMessage(WAIT));
      hostOf.put(m.rentalId(), m.reservation().hostId());
    }
    assertEquals(Map.of(first, "h-a", second, "h-a", third, "h-b"), hostOf);
  }

  /**
   * Proposals sent together that get no answer in time are each undone at the host (it may still
   * reserve), and each moves on to its next candidate.
   */
  @Test
  void proposalsSentTogetherWithoutAnAnswerAreEachUndoneAndMoveOn() {
    Hosts hosts = new Hosts("h-slow", "h-ok");
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String first = rentalId();
    String second = rentalId();
    String third = rentalId();
    Host.ReserveCards p1 =
        requestsAtOneHost(
            hosts,
            "h-slow",
            "h-ok",
            Duration.ofMillis(300),
            List.of(first, second, third),
            replyTo);
    p1.replyTo().tell(StatusReply.success(reservation("h-slow", first, List.of(0), 1, T1)));
    assertEquals(
        first, assertInstanceOf(Matcher.Matched.class, replyTo.receiveMessage(WAIT)).rentalId());

    TestProbe<Host.Command> slow = hosts.probes.get("h-slow");
    slow.expectMessageClass(Host.ReserveCardsBatch.class, WAIT); // never answered
    Host.ReleaseCards undo2 = slow.expectMessageClass(Host.ReleaseCards.class, WAIT);
    Host.ReleaseCards undo3 = slow.expectMessageClass(Host.ReleaseCards.class, WAIT);
    assertEquals(List.of(second, third), List.of(undo2.rentalId(), undo3.rentalId()));
    assertTrue(undo2.undoesProposal() && undo3.undoesProposal());

    Host.ReserveCards p2 = hosts.expectProposal("h-ok");
    assertEquals(second, p2.rentalId());
    p2.replyTo().tell(StatusReply.success(reservation("h-ok", second, List.of(0), 2, T1)));
    Host.ReserveCards p3 = hosts.expectProposal("h-ok");
    assertEquals(third, p3.rentalId());
    p3.replyTo().tell(StatusReply.success(reservation("h-ok", third, List.of(1), 2, T1)));
    for (int i = 0; i < 2; i++)
      assertEquals(
          "h-ok",
          assertInstanceOf(Matcher.Matched.class, replyTo.receiveMessage(WAIT))
              .reservation()
              .hostId());
  }

  @Test
  void aResubmittedRequestIsMatchedOnce() {
    Hosts hosts = new Hosts("h-a");
    ActorRef<Matcher.Command> matcher = matcher(List.of(new Candidate("h-a", 1, 8)), hosts, WAIT);
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String rentalId = rentalId();
    matcher.tell(
        new Match(
            rentalId, GPU, 1, Listing.Tier.ON_DEMAND, REGION, CEILING, null, replyTo.getRef()));
    Host.ReserveCards proposal = hosts.expectProposal("h-a");
    matcher.tell(
        new Match(
            rentalId, GPU, 1, Listing.Tier.ON_DEMAND, REGION, CEILING, null, replyTo.getRef()));
    hosts.expectNoProposal(Duration.ofMillis(200));
    proposal.replyTo().tell(StatusReply.success(reservation("h-a", rentalId, List.of(0), 1)));
    assertInstanceOf(Matcher.Matched.class, replyTo.receiveMessage(WAIT));
    replyTo.expectNoMessage(Duration.ofMillis(200));
  }

  @Test
  void aRequestWhoseRentalStoppedWaitingIsNotProposed() {
    Hosts hosts = new Hosts("h-a");
    ActorRef<Matcher.Command> matcher = matcher(List.of(new Candidate("h-a", 1, 8)), hosts, WAIT);
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    matcher.tell(
        new Match(
            "r-late",
            GPU,
            1,
            Listing.Tier.ON_DEMAND,
            REGION,
            CEILING,
            java.time.Instant.now().minusSeconds(1),
            replyTo.getRef()));
    assertEquals(
        "r-late", assertInstanceOf(Matcher.NoMatch.class, replyTo.receiveMessage(WAIT)).rentalId());
    hosts.expectNoProposal(Duration.ofMillis(200));
  }

  /**
   * A proposal waiting for a host's answer to an earlier one is not sent once its rental stopped
   * waiting: the rental hears it is not matched, and no card is reserved for it (it would be held
   * until the claim window ran out). The others waiting with it still go.
   */
  @Test
  void aProposalWaitingForTheHostIsNotSentAfterItsRentalStoppedWaiting() {
    Hosts hosts = new Hosts("h-a");
    TestClock clock = new TestClock(T0);
    ActorRef<Matcher.Command> matcher =
        testKit.spawn(
            Matcher.create(
                (gpu, region, tier, max, count, renter, needs, held) ->
                    CompletableFuture.completedFuture(List.of(new Candidate("h-a", 1, 8))),
                hosts::ref,
                Matcher.Settings.defaults(WAIT),
                clock));
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String first = rentalId();
    String late = rentalId();
    String patient = rentalId();
    matcher.tell(
        new Match(first, GPU, 1, Listing.Tier.ON_DEMAND, REGION, CEILING, null, replyTo.getRef()));
    Host.ReserveCards p1 = hosts.expectProposal("h-a");
    matcher.tell(
        new Match(
            late,
            GPU,
            1,
            Listing.Tier.ON_DEMAND,
            REGION,
            CEILING,
            T0.plusSeconds(10),
            replyTo.getRef()));
    matcher.tell(
        new Match(
            patient, GPU, 1, Listing.Tier.ON_DEMAND, REGION, CEILING, null, replyTo.getRef()));
    hosts.probes.get("h-a").expectNoMessage(Duration.ofMillis(200)); // both wait for its answer

    clock.advance(Duration.ofSeconds(11)); // the late rental's deadline passes meanwhile
    p1.replyTo().tell(StatusReply.success(reservation("h-a", first, List.of(0), 1, T1)));

    Host.ReserveCards alone = hosts.expectProposal("h-a");
    assertEquals(patient, alone.rentalId());
    alone.replyTo().tell(StatusReply.success(reservation("h-a", patient, List.of(1), 1, T1)));
    Map<String, Class<?>> results = new HashMap<>();
    for (int i = 0; i < 3; i++) {
      Matcher.Result r = replyTo.receiveMessage(WAIT);
      String rentalId =
          r instanceof Matcher.Matched m
              ? m.rentalId()
              : r instanceof Matcher.NoMatch n
                  ? n.rentalId()
                  : ((Matcher.Unavailable) r).rentalId();
      results.put(rentalId, r.getClass());
    }
    assertEquals(
        Map.of(
            first,
            Matcher.Matched.class,
            late,
            Matcher.NoMatch.class,
            patient,
            Matcher.Matched.class),
        results);
    hosts.expectNoProposal(Duration.ofMillis(200));
  }

  /**
   * With REAL hosts and a read side that does not filter by owner: the host entity refuses its own
   * owner, so a renter is matched to another provider's host, or to none.
   */
  @Test
  void neverMatchesARenterWithItsOwnHost() {
    int n = IDS.incrementAndGet();
    MarketHost own = new MarketHost(testKit, "own-" + n, 4, 1_000_000); // the cheapest
    MarketHost other = new MarketHost(testKit, "other-" + n, 4, 2_000_000);
    Map<String, MarketHost> byId = Map.of(own.hostId, own, other.hostId, other);
    List<String> askedFor = new java.util.concurrent.CopyOnWriteArrayList<>();
    Matcher.Candidates unfiltered =
        (gpu, region, tier, max, count, renter, needs, held) -> {
          askedFor.add(renter);
          return CompletableFuture.completedFuture(
              List.of(
                  new Candidate(own.hostId, own.floor, 4),
                  new Candidate(other.hostId, other.floor, 4)));
        };
    ActorRef<Matcher.Command> matcher =
        testKit.spawn(Matcher.create(unfiltered, id -> byId.get(id).ref, WAIT));
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    String renter = own.ownerId;

    matcher.tell(
        new Match(
            "rental-own-" + n,
            renter,
            GPU,
            1,
            Listing.Tier.ON_DEMAND,
            REGION,
            CEILING,
            null,
            replyTo.getRef()));
    Matcher.Matched matched = assertInstanceOf(Matcher.Matched.class, replyTo.receiveMessage(WAIT));
    assertEquals(
        other.hostId, matched.reservation().hostId(), "not the renter's own, cheaper host");
    assertEquals(List.of(renter), askedFor, "the candidate query hears whose rental it is");
    assertEquals(
        List.of(), own.view().cards().stream().filter(c -> !c.state().equals("free")).toList());

    // with only its own host on the market, the renter gets no match
    Matcher.Candidates onlyOwn =
        (gpu, region, tier, max, count, r, needs, held) ->
            CompletableFuture.completedFuture(List.of(new Candidate(own.hostId, own.floor, 4)));
    ActorRef<Matcher.Command> second =
        testKit.spawn(Matcher.create(onlyOwn, id -> byId.get(id).ref, WAIT));
    second.tell(
        new Match(
            "rental-own2-" + n,
            renter,
            GPU,
            1,
            Listing.Tier.ON_DEMAND,
            REGION,
            CEILING,
            null,
            replyTo.getRef()));
    assertInstanceOf(Matcher.NoMatch.class, replyTo.receiveMessage(WAIT));
    // while another renter gets that host
    second.tell(
        new Match(
            "rental-else-" + n,
            "someone-else",
            GPU,
            1,
            Listing.Tier.ON_DEMAND,
            REGION,
            CEILING,
            null,
            replyTo.getRef()));
    assertEquals(
        own.hostId,
        assertInstanceOf(Matcher.Matched.class, replyTo.receiveMessage(WAIT))
            .reservation()
            .hostId());
  }

  @Test
  void aMatchRequestAndItsProposalCarryTheRenterAcrossNodes() {
    var serialization =
        new org.apache.pekko.actor.testkit.typed.javadsl.SerializationTestKit(testKit.system());
    TestProbe<Matcher.Result> replyTo = testKit.createTestProbe();
    TestProbe<StatusReply<Host.Reservation>> reserved = testKit.createTestProbe();
    serialization.verifySerialization(
        new Match(
            "r-1",
            "acc-1",
            GPU,
            2,
            Listing.Tier.ON_DEMAND,
            REGION,
            CEILING,
            null,
            replyTo.getRef()),
        true);
    serialization.verifySerialization(
        new Host.ReserveCards(
            "r-1", "acc-1", GPU, 2, Listing.Tier.ON_DEMAND, CEILING, reserved.getRef()),
        true);
  }

  @Test
  void proposalsSentTogetherAndTheirAnswersCrossNodes() {
    var serialization =
        new org.apache.pekko.actor.testkit.typed.javadsl.SerializationTestKit(testKit.system());
    TestProbe<StatusReply<Host.Reservations>> answers = testKit.createTestProbe();
    serialization.verifySerialization(
        new Host.ReserveCardsBatch(
            List.of(
                new Host.ReserveCards(
                    "r-1",
                    "acc-1",
                    GPU,
                    2,
                    Listing.Tier.ON_DEMAND,
                    CEILING,
                    Duration.ofSeconds(60),
                    null),
                new Host.ReserveCards(
                    "r-2", "acc-2", GPU, 1, Listing.Tier.SPOT, CEILING, null, null)),
            answers.getRef()),
        true);
    serialization.verifySerialization(
        new Host.Reservations(
            List.of(
                new Host.ReservationAnswer(
                    "r-1", reservation("h-a", "r-1", List.of(0, 1), 1_500_000, T1), null),
                new Host.ReservationAnswer(
                    "r-2", null, "insufficient_cards: 0 free cards, 1 asked"))),
        true);
  }

  @Test
  void concurrentRequestsNeverGetTheSameCardFromRealHosts() {
    int n = IDS.incrementAndGet();
    List<MarketHost> market =
        List.of(
            new MarketHost(testKit, "cheap-" + n, 2, 1_800_000),
            new MarketHost(testKit, "mid-" + n, 4, 2_000_000),
            new MarketHost(testKit, "dear-" + n, 2, 2_900_000),
            new MarketHost(
                testKit, "over-" + n, 8, 3_500_000)); // above every ceiling: the host refuses it
    Map<String, MarketHost> byId = new HashMap<>();
    market.forEach(h -> byId.put(h.hostId, h));
    // The read side lags: it still offers every card of every host, whatever was taken since.
    List<Candidate> stale = market.stream().map(h -> new Candidate(h.hostId, h.floor, 8)).toList();
    Matcher.Candidates candidates =
        (gpu, region, tier, max, count, renter, needs, held) ->
            CompletableFuture.completedFuture(stale);
    // Two matchers propose at once (a shard moving between nodes): the hosts still hand each card
    // out once.
    List<ActorRef<Matcher.Command>> matchers =
        List.of(
            testKit.spawn(Matcher.create(candidates, id -> byId.get(id).ref, WAIT)),
            testKit.spawn(Matcher.create(candidates, id -> byId.get(id).ref, WAIT)));

    Random random = new Random(n);
    TestProbe<Matcher.Result> results = testKit.createTestProbe();
    Map<String, Integer> asked = new HashMap<>();
    for (int i = 0; i < 12; i++) {
      String rentalId = "rental-c" + n + "-" + i;
      int count = 1 + random.nextInt(2);
      asked.put(rentalId, count);
      matchers
          .get(i % 2)
          .tell(
              new Match(
                  rentalId,
                  GPU,
                  count,
                  Listing.Tier.ON_DEMAND,
                  REGION,
                  CEILING,
                  null,
                  results.getRef()));
    }

    Map<String, String> cardHolder = new HashMap<>(); // "host/card" -> rental
    List<String> unmatched = new ArrayList<>();
    int matchedCards = 0;
    for (int i = 0; i < asked.size(); i++) {
      Matcher.Result result = results.receiveMessage(WAIT);
      if (result instanceof Matcher.Matched m) {
        Host.Reservation r = m.reservation();
        assertEquals(m.rentalId(), r.rentalId());
        assertEquals(asked.get(m.rentalId()), r.cards().size(), "as many cards as asked");
        assertEquals(
            byId.get(r.hostId()).floor, r.pricePerGpuHour(), "the host's floor, not the ceiling");
        assertTrue(r.pricePerGpuHour() <= CEILING);
        for (int card : r.cards()) {
          String previous = cardHolder.put(r.hostId() + "/" + card, m.rentalId());
          assertNull(
              previous,
              () ->
                  "card "
                      + r.hostId()
                      + "/"
                      + card
                      + " given to "
                      + previous
                      + " and "
                      + m.rentalId());
        }
        matchedCards += r.cards().size();
      } else {
        unmatched.add(((Matcher.NoMatch) result).rentalId());
      }
    }
    int requested = asked.values().stream().mapToInt(Integer::intValue).sum();
    assertTrue(matchedCards <= 8, "only 8 cards are under the ceiling, " + matchedCards + " given");
    assertTrue(
        !unmatched.isEmpty() || requested <= 8, "more was asked (" + requested + ") than there is");

    // The hosts agree card by card.
    Map<String, String> reservedOnHosts = new HashMap<>();
    Map<String, Integer> free = new HashMap<>();
    for (MarketHost h : market) {
      int freeCards = 0;
      for (Host.CardView card : h.view().cards()) {
        if (card.rentalId() != null)
          reservedOnHosts.put(h.hostId + "/" + card.index(), card.rentalId());
        else freeCards++;
      }
      if (h.floor <= CEILING) free.put(h.hostId, freeCards);
    }
    assertEquals(cardHolder, reservedOnHosts);
    // Cards are only ever taken here, so a request turned away found no host with enough free
    // cards, and still would not.
    for (String rentalId : unmatched) {
      int count = asked.get(rentalId);
      free.forEach(
          (host, cards) ->
              assertTrue(
                  cards < count,
                  rentalId
                      + " asked "
                      + count
                      + " and was turned away, but "
                      + host
                      + " has "
                      + cards
                      + " free"));
    }
    List<String> overCards = new ArrayList<>(reservedOnHosts.keySet());
    overCards.removeIf(k -> !k.startsWith("over-"));
    assertEquals(List.of(), overCards, "a host above the ceiling gives nothing");
  }
}
