package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.engine.snapshot.Snapshot;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.javadsl.CommandHandler;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehavior;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Snapshot events written to the node's journal (by a stand-in for the entity, under its
 * persistence id and tags) reach {@code GET /v1/snapshots} through the node's projection, read
 * right after they were written.
 */
class SnapshotProjectionIntegrationTest {
  static Node node;
  static ApiClient api;
  static final Instant AT = Instant.parse("2026-12-01T10:00:00Z");

  @BeforeAll
  static void start() throws Exception {
    node = HostTestSupport.startNode("snapshot_projection");
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stop() throws Exception {
    if (node != null) node.close();
  }

  record Write(List<Snapshot.Event> events, ActorRef<Done> replyTo) {}

  /** Persists what it is told as the Snapshot entity {@code id} would: same id, same tag. */
  static final class Journal extends EventSourcedBehavior<Write, Snapshot.Event, Integer> {
    private final String id;

    Journal(String id) {
      super(PersistenceId.of(Snapshot.ENTITY_KEY.name(), id));
      this.id = id;
    }

    @Override
    public Integer emptyState() {
      return 0;
    }

    @Override
    public CommandHandler<Write, Snapshot.Event, Integer> commandHandler() {
      return newCommandHandlerBuilder()
          .forAnyState()
          .onCommand(
              Write.class,
              w -> Effect().persist(w.events()).thenRun(s -> w.replyTo().tell(Done.getInstance())))
          .build();
    }

    @Override
    public EventHandler<Integer, Snapshot.Event> eventHandler() {
      return newEventHandlerBuilder().forAnyState().onAnyEvent((n, e) -> n + 1);
    }

    @Override
    public Set<String> tagsFor(Snapshot.Event event) {
      return Set.of(Snapshot.tagFor(id));
    }
  }

  static void write(String id, Snapshot.Event... events) throws Exception {
    Behavior<Write> journal = new Journal(id);
    ActorRef<Write> ref = node.system().systemActorOf(journal, "journal-" + id, Props.empty());
    AskPattern.<Write, Done>ask(
            ref,
            reply -> new Write(List.of(events), reply),
            Duration.ofSeconds(10),
            node.system().scheduler())
        .toCompletableFuture()
        .get(15, TimeUnit.SECONDS);
  }

  @Test
  void aRentersSnapshotsAreListedRightAfterTheirEventsAreWritten() throws Exception {
    ApiClient.Customer renter = api.signUp("Keeper");
    ApiClient.Customer other = api.signUp("Someone else");
    String failed = "snap_" + "1".repeat(24), uploading = "snap_" + "2".repeat(24);
    write(
        failed,
        new Snapshot.Created(
            renter.id(), "rnt_" + "1".repeat(24), "host_h", "h100-80gb", "eu-nl", AT),
        new Snapshot.ManifestRecorded(3_000_000, "ab".repeat(32), 1, AT.plusSeconds(5)),
        new Snapshot.UploadFailed("quota_exceeded", "over 100 GiB", AT.plusSeconds(6)));
    write(
        uploading,
        new Snapshot.Created(
            renter.id(),
            "rnt_" + "2".repeat(24),
            "host_h",
            "a100-80gb",
            "eu-de",
            AT.plusSeconds(10)));

    JsonNode list = api.get("/v1/snapshots", renter.apiKey()).expect(200).json();
    JsonNode snapshots = list.get("snapshots");
    assertEquals(2, snapshots.size(), list.toString());
    JsonNode newest = snapshots.get(0), first = snapshots.get(1);
    assertEquals(uploading, newest.get("id").asText());
    assertEquals("uploading", newest.get("status").asText());
    assertTrue(newest.get("failure").isNull());
    assertEquals("0.000000", newest.get("cost").asText());
    assertEquals(failed, first.get("id").asText());
    assertEquals("failed", first.get("status").asText());
    assertEquals(3_000_000, first.get("size_bytes").asLong());
    assertEquals("quota_exceeded", first.get("failure").get("code").asText());
    assertEquals("over 100 GiB", first.get("failure").get("detail").asText());
    assertEquals("h100-80gb", first.get("gpu").asText());

    JsonNode page = api.get("/v1/snapshots?limit=1", renter.apiKey()).expect(200).json();
    assertEquals(1, page.get("snapshots").size());
    JsonNode rest =
        api.get("/v1/snapshots?limit=1&after=" + page.get("next_after").asText(), renter.apiKey())
            .expect(200)
            .json();
    assertEquals(failed, rest.get("snapshots").get(0).get("id").asText());
    assertEquals(
        List.of(failed),
        api.get("/v1/snapshots?status=failed", renter.apiKey())
            .expect(200)
            .json()
            .get("snapshots")
            .findValuesAsText("id"));
    assertEquals(
        0, api.get("/v1/snapshots", other.apiKey()).expect(200).json().get("snapshots").size());
  }
}
