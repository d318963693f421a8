package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.money.Money;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Many renters racing for few cards on a real node, agent and PostgreSQL: the host entity is the
 * one authority on its cards, so exactly as many rentals run as there are cards, never two on one
 * card; the others wait and end {@code no_capacity} with their holds released. And an {@code
 * Idempotency-Key} sent many times at once creates one rental.
 */
class RentalConcurrencyIntegrationTest {
  static final Duration WAIT = Duration.ofSeconds(40);
  static final String PRICE = "2.49";
  static final long PRICE_MICROS = Money.parse(PRICE);
  static final int CARDS = 2;
  static final int RENTERS = 8;
  static final Set<Rental.Status> HOLDING_CARDS =
      Set.of(Rental.Status.PROVISIONING, Rental.Status.RUNNING, Rental.Status.STOPPING);

  static Node node;
  static ApiClient api;
  static ApiClient.Customer provider;
  static Agent agent;
  static String hostId;
  static ExecutorService pool;

  @BeforeAll
  static void start() throws Exception {
    Path temp = Files.createTempDirectory("tickmark-rental-concurrency");
    DatabaseSettings db = TestDatabase.fresh("rental_concurrency");
    node =
        Node.start(
            TestNodes.settings(db)
                .withConfig("tickmark.market.allow-simulated-hosts", true)
                // The simulated host measures this machine's disk, which other builds keep busy:
                // judge it as dev mode does.
                .withConfig("tickmark.verification.min-disk-write-mib-per-s", 10)
                .withConfig("tickmark.hosts.heartbeat-timeout", "5s")
                .withConfig("tickmark.hosts.heartbeat-interval", "1s")
                .withConfig("tickmark.rentals.settle-interval", "2s")
                .withConfig("tickmark.rentals.provisioning-timeout", "20s")
                .withConfig("tickmark.rentals.stop-timeout", "5s"));
    api = new ApiClient(node.baseUrl());
    provider = api.signUp("Provider");
    String token =
        api.post("/v1/hosts/registration-tokens", provider.apiKey(), "{\"region\":\"eu-nl\"}")
            .expect(201)
            .json()
            .get("token")
            .asText();
    agent =
        Agent.start(
            AgentConfig.simulated(
                "ws://127.0.0.1:" + node.httpPort(),
                token,
                temp.resolve("agent"),
                "h100-80gb:" + CARDS));
    hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"" + PRICE + "\",\"listed\":true}")
        .expect(200);
    eventually(WAIT, () -> assertEquals(CARDS, offered(), "the host is on the market"));
    pool = Executors.newFixedThreadPool(RENTERS + 1);
  }

  @AfterAll
  static void stop() throws Exception {
    if (pool != null) pool.shutdownNow();
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  @Test
  void eightRentersRaceForTwoCardsAndNoCardIsEverRentedTwice() throws Exception {
    List<ApiClient.Customer> renters = new ArrayList<>();
    for (int i = 0; i < RENTERS; i++) renters.add(renter("Racer " + i, "10"));
    String body =
        "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\"eu-nl\",\"max_price_per_gpu_hour\":\"3.00\","
            + "\"image\":\"ubuntu:24.04\",\"command\":[\"sleep\",\"3600\"],\"wait_seconds\":3}";

    // Everyone launches at the same instant; each launch's rental joins what the watcher below
    // checks.
    List<String> launched = new CopyOnWriteArrayList<>();
    CountDownLatch ready = new CountDownLatch(RENTERS);
    CountDownLatch go = new CountDownLatch(1);
    List<Future<JsonNode>> launches = new ArrayList<>();
    for (ApiClient.Customer renter : renters) {
      launches.add(
          pool.submit(
              () -> {
                ready.countDown();
                go.await();
                JsonNode rental =
                    api.post("/v1/rentals", renter.apiKey(), body).expect(201).json().get("rental");
                launched.add(rental.get("id").asText());
                return rental;
              }));
    }
    assertTrue(ready.await(10, TimeUnit.SECONDS));

    // Meanwhile the host entity's cards and the rentals' frozen terms are sampled over and over: a
    // card is held by
    // one rental at most, no rental holds two, and never do more rentals hold cards than the host
    // has.
    AtomicBoolean watching = new AtomicBoolean(true);
    List<String> violations = new CopyOnWriteArrayList<>();
    AtomicInteger samples = new AtomicInteger();
    Future<?> watcher =
        pool.submit(
            () -> {
              while (watching.get()) {
                Host.HostView host = hostEntity();
                Map<Integer, String> holders = new HashMap<>();
                for (Host.CardView card : host.cards()) {
                  if (card.state().equals("free")) {
                    if (card.rentalId() != null)
                      violations.add("free card " + card.index() + " names " + card.rentalId());
                  } else if (card.rentalId() == null) {
                    violations.add("card " + card.index() + " is " + card.state() + " for nobody");
                  } else {
                    holders.put(card.index(), card.rentalId());
                  }
                }
                if (new HashSet<>(holders.values()).size() != holders.size())
                  violations.add("one rental holds two cards: " + holders);
                Map<Integer, String> byTerms = new HashMap<>();
                int holding = 0;
                for (String id : launched) {
                  Rental.View v = rentalEntity(id);
                  if (v.terms() == null || !HOLDING_CARDS.contains(v.status())) continue;
                  holding++;
                  if (!hostId.equals(v.terms().hostId()))
                    violations.add(id + " matched another host: " + v.terms());
                  if (v.terms().cards().size() != 1)
                    violations.add(id + " holds " + v.terms().cards());
                  for (int card : v.terms().cards()) {
                    String other = byTerms.put(card, id);
                    if (other != null)
                      violations.add("card " + card + " rented to " + other + " and " + id);
                  }
                }
                if (holding > CARDS)
                  violations.add(holding + " rentals hold cards of a " + CARDS + "-card host");
                samples.incrementAndGet();
                Thread.sleep(20); // pacing of the sampler, not a synchronisation
              }
              return null;
            });

    go.countDown();
    Map<String, ApiClient.Customer> owners = new HashMap<>();
    String[] ids = new String[RENTERS];
    for (int i = 0; i < RENTERS; i++) {
      JsonNode rental = launches.get(i).get(30, TimeUnit.SECONDS);
      ids[i] = rental.get("id").asText();
      owners.put(ids[i], renters.get(i));
      // Answered after the first match attempt: matched, waiting, or (on a slow machine) already
      // out of wait time.
      assertTrue(
          Set.of("pending", "provisioning", "stopping", "ended")
              .contains(rental.get("status").asText()),
          rental.toString());
    }
    assertEquals(RENTERS, Set.of(ids).size(), "eight distinct rentals");

    // Exactly two run; the other six wait their three seconds and end no_capacity.
    Map<String, JsonNode> finalViews = new HashMap<>();
    eventually(
        WAIT,
        () -> {
          int running = 0;
          int noCapacity = 0;
          for (String id : ids) {
            JsonNode r = rental(owners.get(id), id);
            finalViews.put(id, r);
            if (r.get("status").asText().equals("running")) running++;
            else if (r.get("status").asText().equals("ended")
                && "no_capacity".equals(r.get("end_reason").asText(null))) noCapacity++;
          }
          assertEquals(CARDS, running, finalViews.toString());
          assertEquals(RENTERS - CARDS, noCapacity, finalViews.toString());
        });
    // Steady state: the host's taken cards are exactly the running rentals' cards, one each.
    List<String> winners = new ArrayList<>();
    for (String id : ids)
      if (finalViews.get(id).get("status").asText().equals("running")) winners.add(id);
    eventually(
        WAIT,
        () -> {
          Host.HostView host = hostEntity();
          Map<String, Integer> cardOf = new HashMap<>();
          for (Host.CardView card : host.cards()) {
            assertEquals("rented", card.state(), host.cards().toString());
            assertNull(
                cardOf.put(card.rentalId(), card.index()), "one card per rental: " + host.cards());
          }
          assertEquals(new HashSet<>(winners), cardOf.keySet());
          for (String id : winners)
            assertEquals(List.of(cardOf.get(id)), rentalEntity(id).terms().cards());
          JsonNode viaHttp = api.get("/v1/hosts/" + hostId, provider.apiKey()).expect(200).json();
          int taken = 0;
          for (JsonNode card : viaHttp.get("cards"))
            if (!card.get("state").asText().equals("free")) taken++;
          assertEquals(winners.size(), taken, viaHttp.toString());
        });
    assertEquals(0, offered(), "nothing left on the market");

    watching.set(false);
    watcher.get(10, TimeUnit.SECONDS);
    assertTrue(samples.get() > 0);
    System.out.printf(
        "card invariant held over %d samples of the host and the rentals%n", samples.get());
    assertTrue(violations.isEmpty(), "card invariant broken: " + violations);

    // The losers were never matched, charged nothing, and their holds are back.
    for (String id : ids) {
      if (winners.contains(id)) continue;
      JsonNode loser = finalViews.get(id);
      assertTrue(
          loser.get("matched_at") == null || loser.get("matched_at").isNull(), loser.toString());
      assertEquals(0, loser.get("billed_seconds").asLong());
      assertEquals("0.000000", loser.get("cost").asText());
    }

    // Stop the two winners; every account is settled and the books balance.
    Map<String, Instant> stoppedAt = new HashMap<>();
    for (String id : winners) {
      stoppedAt.put(id, Instant.now());
      api.post("/v1/rentals/" + id + "/stop", owners.get(id).apiKey(), null).expect(202);
    }
    long totalCost = 0;
    for (String id : winners) {
      JsonNode ended = awaitEnded(owners.get(id), id);
      assertEquals("stopped_by_renter", ended.get("end_reason").asText(), ended.toString());
      long billed = ended.get("billed_seconds").asLong();
      long window =
          Duration.between(Instant.parse(ended.get("started_at").asText()), stoppedAt.get(id))
              .getSeconds();
      assertTrue(
          Math.abs(billed - window) <= 1,
          "billed " + billed + " s for a window of " + window + " s");
      long cost = Metering.cost(PRICE_MICROS, 1, billed);
      assertEquals(Money.format(cost), ended.get("cost").asText());
      totalCost += cost;
    }
    long expectedCaptures = totalCost;
    eventually(
        WAIT,
        () -> {
          for (String id : ids) {
            ApiClient.Customer owner = owners.get(id);
            JsonNode account = api.account(owner.apiKey());
            long cost =
                winners.contains(id) ? Money.parse(rental(owner, id).get("cost").asText()) : 0;
            assertEquals(
                "0.000000",
                account.get("held").asText(),
                "hold released for " + id + ": " + account);
            assertEquals(
                Money.format(Money.parse("10") - cost),
                account.get("balance").asText(),
                account.toString());
            assertEquals(
                account.get("balance").asText(),
                account.get("available").asText(),
                account.toString());
          }
          JsonNode audit = api.audit();
          assertTrue(audit.get("conserved").asBoolean(), audit.toString());
          assertEquals("0.000000", audit.get("pending_captures").asText(), audit.toString());
          assertEquals("0.000000", audit.get("pending_credits").asText(), audit.toString());
          assertEquals("0.000000", audit.get("holds_open").asText(), audit.toString());
          assertEquals(
              Money.format(expectedCaptures), audit.get("captures").asText(), audit.toString());
        });
    eventually(WAIT, () -> assertEquals(CARDS, offered(), "both cards are free again"));
    eventually(
        WAIT, () -> assertTrue(agent.runningRentals().isEmpty(), "no workload left on the agent"));
  }

  @Test
  void oneIdempotencyKeySentManyTimesAtOnceMakesOneRental() throws Exception {
    ApiClient.Customer renter = renter("Impatient", "10");
    // No host offers A100s: the rental waits two seconds and ends no_capacity, which is all this
    // test needs.
    String body =
        "{\"gpu\":\"a100-80gb\",\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\",\"wait_seconds\":2}";
    Map<String, String> key = Map.of("Idempotency-Key", "launch-once-" + renter.id());
    int copies = RENTERS;
    CountDownLatch ready = new CountDownLatch(copies);
    CountDownLatch go = new CountDownLatch(1);
    List<Future<ApiClient.Reply>> sends = new ArrayList<>();
    for (int i = 0; i < copies; i++) {
      sends.add(
          pool.submit(
              () -> {
                ready.countDown();
                go.await();
                return api.send("POST", "/v1/rentals", renter.apiKey(), body, key);
              }));
    }
    assertTrue(ready.await(10, TimeUnit.SECONDS));
    go.countDown();
    Set<String> rentalIds = new HashSet<>();
    int inProgress = 0;
    for (Future<ApiClient.Reply> f : sends) {
      ApiClient.Reply reply = f.get(30, TimeUnit.SECONDS);
      if (reply.status() == 409) {
        reply.expectProblem(409, "idempotency_key_in_progress");
        inProgress++;
      } else {
        rentalIds.add(reply.expect(201).json().get("rental").get("id").asText());
      }
    }
    // The ones told "in progress" retry; they get the first answer again.
    for (int i = 0; i < inProgress; i++) {
      String[] replayed = new String[1];
      eventually(
          WAIT,
          () -> {
            ApiClient.Reply retry = api.send("POST", "/v1/rentals", renter.apiKey(), body, key);
            assertEquals(201, retry.status(), retry.body());
            assertEquals("true", retry.header("Idempotent-Replayed"));
            replayed[0] = retry.json().get("rental").get("id").asText();
          });
      rentalIds.add(replayed[0]);
    }
    assertEquals(1, rentalIds.size(), "one rental for one key: " + rentalIds);
    System.out.printf(
        "%d identical launches at once: %d answered, %d told in progress and replayed on retry%n",
        copies, copies - inProgress, inProgress);
    String id = rentalIds.iterator().next();

    // The same key with another body is refused, and the list holds one rental.
    api.send(
            "POST",
            "/v1/rentals",
            renter.apiKey(),
            body.replace("\"wait_seconds\":2", "\"wait_seconds\":3"),
            key)
        .expectProblem(409, "idempotency_key_reused");
    JsonNode ended = awaitEnded(renter, id);
    assertEquals("no_capacity", ended.get("end_reason").asText(), ended.toString());
    eventually(
        WAIT,
        () -> {
          JsonNode listed =
              api.get("/v1/rentals", renter.apiKey()).expect(200).json().get("rentals");
          assertEquals(1, listed.size(), listed.toString());
          assertEquals(id, listed.get(0).get("id").asText());
          int holds = 0;
          for (JsonNode e : api.ledger(renter.apiKey(), "?limit=500").get("entries")) {
            if (e.get("kind").asText().equals("hold")) holds++;
            assertNotEquals("capture", e.get("kind").asText(), "nothing charged");
          }
          assertEquals(1, holds, "one hold placed");
          JsonNode account = api.account(renter.apiKey());
          assertEquals("0.000000", account.get("held").asText(), account.toString());
          assertEquals("10.000000", account.get("balance").asText(), account.toString());
          assertTrue(api.audit().get("conserved").asBoolean());
        });
  }

  // ---- helpers
  // ------------------------------------------------------------------------------------

  static ApiClient.Customer renter(String name, String deposit) {
    ApiClient.Customer renter = api.signUp(name);
    api.opsDeposit(renter.id(), deposit, "welcome-" + renter.id()).expect(201);
    return renter;
  }

  static int offered() {
    int cards = 0;
    for (JsonNode o :
        api.get("/v1/offers?gpu=h100-80gb&region=eu-nl&tier=on_demand", null)
            .expect(200)
            .json()
            .get("offers")) {
      cards += o.get("available_cards").asInt();
    }
    return cards;
  }

  static JsonNode rental(ApiClient.Customer renter, String id) {
    return api.get("/v1/rentals/" + id, renter.apiKey()).expect(200).json();
  }

  static JsonNode awaitEnded(ApiClient.Customer renter, String id) {
    JsonNode[] last = new JsonNode[1];
    eventually(
        WAIT,
        () -> {
          last[0] = rental(renter, id);
          assertEquals("ended", last[0].get("status").asText(), last[0].toString());
        });
    assertNotNull(last[0]);
    return last[0];
  }

  /** The host entity's own view (card → rental), which the HTTP view deliberately does not show. */
  static Host.HostView hostEntity() {
    try {
      return ClusterSharding.get(node.system())
          .entityRefFor(Host.ENTITY_KEY, hostId)
          .<Host.HostView>askWithStatus(reply -> new Host.Get(null, reply), Duration.ofSeconds(5))
          .toCompletableFuture()
          .get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new AssertionError("the host entity did not answer: " + e, e);
    }
  }

  static Rental.View rentalEntity(String id) {
    try {
      return ClusterSharding.get(node.system())
          .entityRefFor(Rental.ENTITY_KEY, id)
          .<Rental.View>askWithStatus(reply -> new Rental.Get(null, reply), Duration.ofSeconds(5))
          .toCompletableFuture()
          .get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      fail("the rental entity " + id + " did not answer: " + e);
      return null;
    }
  }
}
