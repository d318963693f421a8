package dev.tickmark.engine.sim;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import org.apache.pekko.dispatch.Futures;
import org.apache.pekko.persistence.AtomicWrite;
import org.apache.pekko.persistence.PersistentRepr;
import org.apache.pekko.persistence.journal.Tagged;
import org.apache.pekko.persistence.journal.japi.AsyncWriteJournal;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.Serializer;
import org.apache.pekko.serialization.Serializers;
import scala.concurrent.Future;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The simulation's in-memory journal. The testkit's {@code PersistenceTestKitPlugin} copies (and,
 * serializing, deserializes and serializes again) every event of a persistence id on every write to
 * it, so a write costs as much as the entity's whole history: fine for a unit test, quadratic for a
 * market run of hours. This one keeps each event once, after a round trip through its serializer
 * (jackson-cbor, as the node's journal would), shows every write to the simulation's auditor, and
 * replays a range in O(range).
 */
public final class SimJournal extends AsyncWriteJournal {
  private final Map<String, List<PersistentRepr>> events = new HashMap<>();
  private final Map<String, Long> deletedTo = new HashMap<>();
  private final Serialization serialization = SerializationExtension.get(context().system());
  private final SimLoop loop =
      SimLoop.get(context().system().settings().config().getString("tickmark.sim.loop-id"));

  @Override
  public Future<Iterable<Optional<Exception>>> doAsyncWriteMessages(
      Iterable<AtomicWrite> messages) {
    List<Optional<Exception>> results = new ArrayList<>();
    for (AtomicWrite write : messages) {
      List<PersistentRepr> batch = new ArrayList<>();
      List<Object> payloads = new ArrayList<>();
      for (PersistentRepr repr : CollectionConverters.asJava(write.payload())) {
        Object payload = repr.payload() instanceof Tagged t ? t.payload() : repr.payload();
        Object copy = roundTrip(payload);
        batch.add(repr.withPayload(copy));
        payloads.add(copy);
      }
      if (loop.journalListener != null)
        loop.journalListener.accept(write.persistenceId(), payloads);
      events.computeIfAbsent(write.persistenceId(), k -> new ArrayList<>()).addAll(batch);
      results.add(Optional.empty());
    }
    return Futures.successful(results);
  }

  private Object roundTrip(Object payload) {
    Serializer serializer = serialization.findSerializerFor(payload);
    byte[] bytes = serialization.serialize(payload).get();
    return serialization
        .deserialize(bytes, serializer.identifier(), Serializers.manifestFor(serializer, payload))
        .get();
  }

  @Override
  public Future<Void> doAsyncDeleteMessagesTo(String persistenceId, long toSequenceNr) {
    deletedTo.merge(persistenceId, toSequenceNr, Math::max);
    return Futures.successful(null);
  }

  @Override
  public Future<Void> doAsyncReplayMessages(
      String persistenceId,
      long fromSequenceNr,
      long toSequenceNr,
      long max,
      Consumer<PersistentRepr> replayCallback) {
    List<PersistentRepr> list = events.getOrDefault(persistenceId, List.of());
    long deleted = deletedTo.getOrDefault(persistenceId, 0L);
    long from = Math.max(fromSequenceNr, deleted + 1);
    long count = 0;
    // Sequence numbers run 1, 2, 3… per persistence id, so the i-th event has number i + 1.
    for (long seq = Math.max(1, from);
        seq <= toSequenceNr && seq <= list.size() && count < max;
        seq++, count++) {
      replayCallback.accept(list.get((int) (seq - 1)));
    }
    return Futures.successful(null);
  }

  @Override
  public Future<Long> doAsyncReadHighestSequenceNr(String persistenceId, long fromSequenceNr) {
    List<PersistentRepr> list = events.get(persistenceId);
    return Futures.successful(
        list == null || list.isEmpty() ? 0L : list.get(list.size() - 1).sequenceNr());
  }
}
