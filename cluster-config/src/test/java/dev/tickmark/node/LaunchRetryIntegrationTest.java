package dev.tickmark.node;

import static dev.tickmark.node.RecoveryReadIntegrationTest.single;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.engine.FreshEntities;
import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A launch whose first attempt got no answer in time (a 503: the engine may still act on it) and is
 * retried with the same {@code Idempotency-Key} ends as one rental, not two: the retry reaches the
 * rental the first attempt created. The stall is real: the test holds PostgreSQL's lock on the
 * journal table, so every write of the launch waits past the node's launch timeout, then lets go.
 */
class LaunchRetryIntegrationTest {
  private Node node;
  private Agent agent;

  @AfterEach
  void stop() throws Exception {
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  @Test
  void aLaunchRetriedAfterItTimedOutIsTheSameRental() throws Exception {
    Path temp = Files.createTempDirectory("tickmark-launch-retry");
    DatabaseSettings db = TestDatabase.fresh("launch_retry");
    // a launch answers within 3 x ask-timeout: 3 s here
    node =
        Node.start(
            RentingSupport.renting(TestNodes.settings(db))
                .withConfig("tickmark.http.ask-timeout", "1s"));
    ApiClient api = new ApiClient(node.baseUrl());
    ApiClient.Customer provider = api.signUp("Provider");
    agent = RentingSupport.listedHost(node, api, provider, temp.resolve("agent"), "eu-de", 2);
    ApiClient.Customer renter = RentingSupport.renter(api, "Renter", "10");
    Map<String, String> key = Map.of("Idempotency-Key", "launch-that-timed-out");
    String body = RentingSupport.launchBody("eu-de");

    launchTimingOut(db, api, renter, body, key);

    // the stalled launch goes on once the journal takes writes again; its retry finds it
    JsonNode retried =
        api.send("POST", "/v1/rentals", renter.apiKey(), body, key)
            .expect(201)
            .json()
            .get("rental");
    String id = retried.get("id").asText();
    RentingSupport.awaitStatus(api, renter, id, "running");
    JsonNode replayed =
        api.send("POST", "/v1/rentals", renter.apiKey(), body, key).expect(201).json();
    assertEquals(id, replayed.get("rental").get("id").asText(), "the answer kept is the retry's");

    JsonNode listed = api.get("/v1/rentals", renter.apiKey()).expect(200).json().get("rentals");
    assertEquals(1, listed.size(), "one launch, one rental: " + listed);
    assertEquals(id, listed.get(0).get("id").asText());
    // one hold, the rental's own: the first attempt's hold is the retry's, not a second one
    JsonNode entries =
        api.get("/v1/account/ledger?limit=500", renter.apiKey()).expect(200).json().get("entries");
    int holds = 0;
    for (JsonNode entry : entries) {
      if (!entry.get("kind").asText().equals("hold")) continue;
      holds++;
      assertEquals(id, entry.get("rental_id").asText(), entries.toString());
    }
    assertEquals(1, holds, "one hold: " + entries);
  }

  /**
   * A launch's new rental reads nothing to recover ({@link FreshEntities}) when nothing can be
   * written under its id: one drawn at random (no Idempotency-Key), or derived from a seed that its
   * key's claim drew. Both launch and write from number 1.
   */
  @Test
  void aLaunchUnderANewIdReadsNothingToRecover() throws Exception {
    Path temp = Files.createTempDirectory("tickmark-launch-fresh");
    DatabaseSettings db = TestDatabase.fresh("launch_fresh");
    node = Node.start(RentingSupport.renting(TestNodes.settings(db)));
    ApiClient api = new ApiClient(node.baseUrl());
    ApiClient.Customer provider = api.signUp("Provider");
    agent = RentingSupport.listedHost(node, api, provider, temp.resolve("agent"), "eu-de", 2);
    ApiClient.Customer renter = RentingSupport.renter(api, "Renter", "10");
    FreshEntities fresh = FreshEntities.get(node.system());

    long before = fresh.taken();
    String random = RentingSupport.launch(api, renter, "eu-de");
    assertEquals(before + 1, fresh.taken(), "the random id's rental read nothing to recover");
    String keyed =
        api.send(
                "POST",
                "/v1/rentals",
                renter.apiKey(),
                RentingSupport.launchBody("eu-de"),
                Map.of("Idempotency-Key", "first-use"))
            .expect(201)
            .json()
            .get("rental")
            .get("id")
            .asText();
    assertEquals(before + 2, fresh.taken(), "nor did the rental of a key's first use");

    for (String id : new String[] {random, keyed}) {
      RentingSupport.awaitStatus(api, renter, id, "running");
      assertEquals(1L, single(db, "SELECT min(sequence_number) FROM " + journalOf(id)));
    }
  }

  /**
   * A retry that keeps its key's seed reads the journal of the rental the first attempt created,
   * also in a new incarnation. The first attempt (503: the journal held) is refused for want of
   * funds once the journal lets go; after a node restart the retry gets that refusal again, as the
   * rental recorded it. Had the retry's rental been taken as fresh, it would have recovered empty,
   * launched again, and failed on the journal's primary key (a 503).
   */
  @Test
  void aRetryThatKeepsItsSeedRecoversTheFirstAttemptsRental() throws Exception {
    DatabaseSettings db = TestDatabase.fresh("launch_retry_restart");
    NodeSettings settings =
        RentingSupport.renting(TestNodes.settings(db))
            .withConfig("tickmark.http.ask-timeout", "1s");
    node = Node.start(settings);
    ApiClient api = new ApiClient(node.baseUrl());
    ApiClient.Customer renter = api.signUp("Renter"); // no funds
    Map<String, String> key = Map.of("Idempotency-Key", "refused-after-a-timeout");
    String body = RentingSupport.launchBody("eu-de");

    launchTimingOut(db, api, renter, body, key);
    // the stalled launch records its request and its refusal in one write
    String rentals = "SELECT count(*) FROM event_journal WHERE persistence_id LIKE 'Rental|%'";
    Eventually.eventually(RentingSupport.WAIT, () -> assertEquals(2L, single(db, rentals)));

    node.close();
    node = null;
    node = Node.start(settings);
    ApiClient again = new ApiClient(node.baseUrl());
    long taken = FreshEntities.get(node.system()).taken();
    again
        .send("POST", "/v1/rentals", renter.apiKey(), body, key)
        .expectProblem(402, "insufficient_funds");
    assertEquals(taken, FreshEntities.get(node.system()).taken(), "the retry's rental read");
    assertEquals(2L, single(db, rentals), "nothing written again");
  }

  private static String journalOf(String rentalId) {
    return "event_journal WHERE persistence_id = 'Rental|" + rentalId + "'";
  }

  /**
   * A launch that gets no answer in time (503): every write of the journal waits for a lock held
   * meanwhile (reads go on), and goes on once it is let go.
   */
  private static void launchTimingOut(
      DatabaseSettings db,
      ApiClient api,
      ApiClient.Customer renter,
      String body,
      Map<String, String> key)
      throws Exception {
    try (Connection lock = DriverManager.getConnection(db.url(), db.user(), db.password());
        Statement st = lock.createStatement()) {
      lock.setAutoCommit(false);
      st.execute("LOCK TABLE event_journal IN EXCLUSIVE MODE");
      api.send("POST", "/v1/rentals", renter.apiKey(), body, key).expectProblem(503, "unavailable");
      lock.rollback();
    }
  }
}
