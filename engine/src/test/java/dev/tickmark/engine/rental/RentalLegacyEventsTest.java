package dev.tickmark.engine.rental;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.CborSerializable;
import dev.tickmark.engine.host.Listing;
import java.time.Instant;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.Serializer;
import org.apache.pekko.serialization.jackson.JacksonCborSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Events and snapshots written before the rental kept the workload's exit status still recover: the
 * bytes of the older shapes, read under today's manifests, give the same end with no exit status.
 */
@ExtendWith(TestKitJUnit5Extension.class)
class RentalLegacyEventsTest {
  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder()
          .withName("RentalLegacyEventsTest")
          .withCustomConfig(ConfigFactory.load())
          .build();

  private static final Instant T = Instant.parse("2026-11-01T10:00:00Z");

  /** {@link Rental.Ended} as it was before it carried the exit status. */
  public record EndedBeforeTheExitCode(
      Rental.EndReason reason, Instant endAt, long billedSeconds, Instant at, boolean onAgentReport)
      implements CborSerializable {}

  /** {@link Rental.Finished} (a snapshot's state) as it was before it carried the exit status. */
  public record FinishedBeforeTheExitCode(
      Rental.Order order,
      Rental.Terms terms,
      Instant startedAt,
      List<Rental.Checkpoint> checkpoints,
      Rental.EndReason reason,
      Instant endAt,
      long billedSeconds,
      Instant closedAt)
      implements CborSerializable {}

  @Test
  void anEndWrittenBeforeTheExitStatusReadsAsHavingNone() {
    Object decoded =
        readAs(
            new EndedBeforeTheExitCode(
                Rental.EndReason.WORKLOAD_EXITED, T.minusSeconds(1), 9, T, true),
            Rental.Ended.class);
    assertEquals(
        new Rental.Ended(Rental.EndReason.WORKLOAD_EXITED, T.minusSeconds(1), 9, T, true, null),
        decoded);
  }

  @Test
  void aFinishedRentalsSnapshotWrittenBeforeTheExitStatusReadsAsHavingNone() {
    Rental.Order order =
        new Rental.Order(
            "acc_renter",
            new Rental.Spec(
                "h100-80gb",
                1,
                Listing.Tier.ON_DEMAND,
                null,
                3_000_000,
                "ubuntu:24.04",
                List.of("true"),
                null,
                null,
                30,
                false,
                null),
            250_000,
            T.minusSeconds(60));
    Rental.Terms terms =
        new Rental.Terms("host-1", "acc_p", List.of(0), 2_000_000, true, T.minusSeconds(59), "eu");
    Object decoded =
        readAs(
            new FinishedBeforeTheExitCode(
                order,
                terms,
                T.minusSeconds(50),
                List.of(),
                Rental.EndReason.WORKLOAD_EXITED,
                T.minusSeconds(10),
                40,
                T),
            Rental.Finished.class);
    assertEquals(
        new Rental.Finished(
            order,
            terms,
            T.minusSeconds(50),
            List.of(),
            Rental.EndReason.WORKLOAD_EXITED,
            T.minusSeconds(10),
            40,
            T,
            null,
            List.of()),
        decoded);
  }

  /** The bytes of {@code old}, read the way the journal reads them: by serializer and manifest. */
  private Object readAs(Object old, Class<?> today) {
    Serialization serialization = SerializationExtension.get(Adapter.toClassic(testKit.system()));
    Serializer serializer = serialization.findSerializerFor(old);
    assertInstanceOf(JacksonCborSerializer.class, serializer);
    byte[] bytes = serialization.serialize(old).get();
    return serialization.deserialize(bytes, serializer.identifier(), today.getName()).get();
  }
}
