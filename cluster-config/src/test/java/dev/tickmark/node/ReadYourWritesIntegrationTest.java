package dev.tickmark.node;

import static dev.tickmark.node.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.engine.money.Metering;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * DESIGN.md: "a caller always reads its own writes". The lists a caller reads (its ledger, its
 * rentals) come from projections; here those are slowed down on purpose (the read journal polls for
 * new events once a second, and the highest event it may read moves once a second too; ~0.2–1 s in
 * production), so a list answered without waiting for its projection would miss a write made a few
 * milliseconds before, every time. No retries around the reads: each one is the first read after
 * the write.
 */
class ReadYourWritesIntegrationTest {
  static final int ROUNDS = 5;

  static Node node;
  static ApiClient api;
  static ApiClient.Customer provider;
  static final List<Agent> agents = new ArrayList<>();
  static Path temp;

  @BeforeAll
  static void start() throws Exception {
    temp = Files.createTempDirectory("tickmark-read-your-writes");
    node =
        Node.start(
            RentingSupport.renting(TestNodes.settings(TestDatabase.fresh("read_your_writes")))
                // a slow read side: new events reach the projections up to two seconds after they
                // are written
                .withConfig("jdbc-read-journal.refresh-interval", "1s")
                .withConfig("jdbc-read-journal.journal-sequence-retrieval.query-delay", "1s")
                // ... so a list may wait that long for its projection
                .withConfig("tickmark.http.read-your-writes-wait", "15s")
                // no checkpoint during a test: the list's billed seconds can only come from the
                // live meter
                .withConfig("tickmark.rentals.settle-interval", "120s"));
    api = new ApiClient(node.baseUrl());
    provider = api.signUp("Provider");
  }

  @AfterAll
  static void stop() throws Exception {
    agents.forEach(Agent::close);
    if (node != null) node.close();
  }

  @Test
  void aDepositIsInTheLedgerReadRightAfterIt() {
    ApiClient.Customer renter = api.signUp("Depositor");
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < ROUNDS; i++) {
      String reference = "wire-" + i + "-" + System.nanoTime();
      api.opsDeposit(renter.id(), "1.5", reference).expect(201);
      keys.add("deposit:manual:" + reference);
      assertEquals(
          keys,
          keys(api.ledger(renter.apiKey(), "")),
          "round " + i + ": the ledger right after the deposit");
    }
    String paymentId = "pay-" + System.nanoTime();
    api.webhook(ApiClient.paymentBody(paymentId, renter.id(), "2", "EUR", "succeeded")).expect(200);
    keys.add("deposit:payment:" + paymentId);
    assertEquals(
        keys, keys(api.ledger(renter.apiKey(), "")), "the ledger right after the payment webhook");
  }

  @Test
  void aLaunchedRentalIsInTheListReadRightAfterIt() {
    ApiClient.Customer renter = RentingSupport.renter(api, "Launcher", "100");
    for (int i = 0; i < ROUNDS; i++) {
      // no host in this region: each rental waits for capacity, and the launch answers at once
      String id = RentingSupport.launch(api, renter, "ap-sg");
      JsonNode listed = listed(renter, id);
      assertTrue(listed != null, "round " + i + ": " + id + " in the list right after its launch");
      assertEquals("pending", listed.get("status").asText());
    }
  }

  @Test
  void aRunningRentalInTheListShowsTheLiveMeter() throws Exception {
    agents.add(RentingSupport.listedHost(node, api, provider, temp.resolve("agent"), "eu-nl", 1));
    ApiClient.Customer renter = RentingSupport.renter(api, "Meter reader", "100");
    String id = RentingSupport.launch(api, renter, "eu-nl");
    RentingSupport.awaitStatus(api, renter, id, "running");
    // the entity's live meter has run a few seconds (there is no settlement checkpoint for two
    // minutes)
    eventually(
        RentingSupport.WAIT,
        () ->
            assertTrue(
                api.get("/v1/rentals/" + id, renter.apiKey())
                        .expect(200)
                        .json()
                        .get("billed_seconds")
                        .asLong()
                    >= 2));

    JsonNode listed = listed(renter, id);
    JsonNode one = api.get("/v1/rentals/" + id, renter.apiKey()).expect(200).json();
    assertTrue(listed != null, id + " listed");
    assertEquals("running", listed.get("status").asText());
    long listedSeconds = listed.get("billed_seconds").asLong();
    long entitySeconds = one.get("billed_seconds").asLong();
    assertTrue(listedSeconds >= 2, "the list shows the live meter: " + listed);
    // read one after the other: the same meter, at most a second apart
    assertTrue(
        entitySeconds - listedSeconds >= 0 && entitySeconds - listedSeconds <= 1,
        listed + " vs " + one);
    long price = Money.parse(RentingSupport.PRICE);
    assertEquals(
        Money.format(Metering.cost(price, 1, listedSeconds)),
        listed.get("cost").asText(),
        "cost(s) of the listed seconds");
    if (listedSeconds == entitySeconds)
      assertEquals(one.get("cost").asText(), listed.get("cost").asText());

    api.post("/v1/rentals/" + id + "/stop", renter.apiKey(), "").expect(202);
  }

  @Test
  void aListingJustSetIsInTheHostListReadRightAfterIt() throws Exception {
    ApiClient.Customer owner = api.signUp("Host owner");
    Agent agent = RentingSupport.listedHost(node, api, owner, temp.resolve("agent-de"), "eu-de", 1);
    agents.add(agent);
    String hostId = agent.welcomed().get().hostId();
    for (int i = 0; i < ROUNDS; i++) {
      String price = "2.0" + i;
      api.put(
              "/v1/hosts/" + hostId + "/listing",
              owner.apiKey(),
              "{\"on_demand_price_per_gpu_hour\":\"" + price + "\",\"listed\":true}")
          .expect(200);
      JsonNode hosts = api.get("/v1/hosts", owner.apiKey()).expect(200).json().get("hosts");
      assertEquals(1, hosts.size(), hosts.toString());
      assertEquals(
          Money.format(Money.parse(price)),
          hosts.get(0).get("on_demand_price_per_gpu_hour").asText(),
          "round " + i + ": the host list right after the listing");
    }
  }

  private static JsonNode listed(ApiClient.Customer renter, String id) {
    for (JsonNode r : api.get("/v1/rentals", renter.apiKey()).expect(200).json().get("rentals")) {
      if (r.get("id").asText().equals(id)) return r;
    }
    return null;
  }

  private static List<String> keys(JsonNode statement) {
    List<String> keys = new ArrayList<>();
    for (JsonNode e : statement.get("entries")) keys.add(e.get("key").asText());
    return keys;
  }
}
