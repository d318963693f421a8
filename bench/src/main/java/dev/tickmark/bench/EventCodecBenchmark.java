package dev.tickmark.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;
import dev.tickmark.bench.MarketBenchSupport.Args;
import dev.tickmark.engine.IsoInstants;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.rental.Rental;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.Serializer;
import org.apache.pekko.serialization.Serializers;

/**
 * What it costs to write an event as the journal stores it and to read it back as a projection
 * does, through Pekko's {@code jackson-cbor} serializer with the node's serialization config,
 * against the same config without {@link IsoInstants} (Jackson's {@code JavaTimeModule} alone) in
 * the same JVM: nanoseconds and bytes allocated per event, rounds alternated. The events are the
 * ones a launch and a running rental write (matched, started, settled, a heartbeat, a confirmed
 * hold). Not a test: a program that measures and prints.
 *
 * <pre>
 * java -cp "bench/target/classes:cluster-config/target/tickmark-node.jar:$third_party_cp" \
 *   dev.tickmark.bench.EventCodecBenchmark [--events=200000] [--rounds=5]
 * </pre>
 */
public final class EventCodecBenchmark {
  private static final PrintStream OUT = System.out;

  private EventCodecBenchmark() {}

  /** One config's serialization: its actor system and the round trips it has done. */
  private record Codec(String name, ActorSystem system, Serialization serialization) {
    static Codec of(String name, Config config) {
      ActorSystem system =
          ActorSystem.create("codec-" + name.replaceAll("\\W+", "-").replaceAll("-$", ""), config);
      return new Codec(name, system, SerializationExtension.get(system));
    }

    /** Writes and reads every event {@code times} times; returns a checksum the JIT cannot drop. */
    long roundTrips(List<Object> events, int times) {
      long sum = 0;
      for (int t = 0; t < times; t++) {
        for (Object event : events) {
          Serializer serializer = serialization.findSerializerFor(event);
          String manifest = Serializers.manifestFor(serializer, event);
          byte[] bytes = serializer.toBinary(event);
          Object back = serialization.deserialize(bytes, serializer.identifier(), manifest).get();
          sum += bytes.length + back.hashCode();
        }
      }
      return sum;
    }
  }

  public static void main(String[] argv) throws Exception {
    Args args = new Args(argv);
    int events = args.integer("events", 200_000);
    int rounds = args.integer("rounds", 5);
    args.requireEmpty();

    Config node =
        ConfigFactory.parseResources("serialization.conf")
            .withFallback(ConfigFactory.parseString("pekko.loglevel = WARNING"))
            .withFallback(ConfigFactory.defaultReference())
            .resolve();
    List<String> modules = node.getStringList("pekko.serialization.jackson.jackson-modules");
    if (!modules.contains(IsoInstants.class.getName()))
      throw new IllegalStateException("serialization.conf does not register IsoInstants");
    List<String> without =
        modules.stream().filter(m -> !m.equals(IsoInstants.class.getName())).toList();
    Config baseline =
        node.withValue(
            "pekko.serialization.jackson.jackson-modules",
            ConfigValueFactory.fromIterable(without));

    List<Object> sample = sample();
    int perRound = Math.max(1, events / sample.size());
    Codec after = Codec.of("node (IsoInstants)", node);
    Codec before = Codec.of("JavaTimeModule alone", baseline);
    var threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    long thread = Thread.currentThread().getId();
    try {
      // The same bytes either way (IsoInstantsTest); checked here too, on these events.
      for (Object e : sample) {
        Serializer a = after.serialization().findSerializerFor(e);
        Serializer b = before.serialization().findSerializerFor(e);
        if (!Arrays.equals(a.toBinary(e), b.toBinary(e)))
          throw new IllegalStateException("different bytes for " + e);
      }
      OUT.printf(
          Locale.ROOT,
          "%d events a round (%d kinds), %d rounds each, alternated; JDK %s%n",
          perRound * sample.size(),
          sample.size(),
          rounds,
          System.getProperty("java.version"));
      // Warm-up: both codecs, long enough for C2.
      for (int w = 0; w < 3; w++) {
        after.roundTrips(sample, perRound);
        before.roundTrips(sample, perRound);
      }
      List<double[]> afterRuns = new ArrayList<>();
      List<double[]> beforeRuns = new ArrayList<>();
      OUT.printf("%-22s %6s %12s %14s%n", "codec", "round", "ns/event", "bytes/event");
      long sink = 0;
      for (int r = 1; r <= rounds; r++) {
        for (Codec codec : r % 2 == 1 ? List.of(after, before) : List.of(before, after)) {
          long bytes0 = threads.getThreadAllocatedBytes(thread);
          long t0 = System.nanoTime();
          sink += codec.roundTrips(sample, perRound);
          long nanos = System.nanoTime() - t0;
          long bytes = threads.getThreadAllocatedBytes(thread) - bytes0;
          double n = (double) perRound * sample.size();
          double[] run = {nanos / n, bytes / n};
          (codec == after ? afterRuns : beforeRuns).add(run);
          OUT.printf(Locale.ROOT, "%-22s %6d %12.0f %14.0f%n", codec.name(), r, run[0], run[1]);
        }
      }
      double nsAfter = median(afterRuns, 0);
      double nsBefore = median(beforeRuns, 0);
      double bytesAfter = median(afterRuns, 1);
      double bytesBefore = median(beforeRuns, 1);
      OUT.printf(
          Locale.ROOT,
          "medians: %.0f ns and %.0f bytes an event with IsoInstants, %.0f ns and %.0f bytes with"
              + " JavaTimeModule alone: time %.2fx, allocation %.2fx (checksum %d)%n",
          nsAfter,
          bytesAfter,
          nsBefore,
          bytesBefore,
          nsAfter / nsBefore,
          bytesAfter / bytesBefore,
          sink);
      String note = sample.size() + " event kinds of a launch and a running rental, write + read";
      BenchResult.against(
              "event-codec",
              "codec.ns",
              "ns per event written and read back, node's serialization",
              nsAfter,
              "ns",
              nsBefore,
              "the same with JavaTimeModule alone (ns)")
          .withNote(note)
          .print();
      BenchResult.against(
              "event-codec",
              "codec.bytes",
              "bytes allocated per event written and read back, node's serialization",
              bytesAfter,
              "bytes",
              bytesBefore,
              "the same with JavaTimeModule alone (bytes)")
          .withNote(note)
          .print();
    } finally {
      after.system().terminate();
      before.system().terminate();
    }
  }

  private static double median(List<double[]> runs, int column) {
    double[] values = runs.stream().mapToDouble(r -> r[column]).sorted().toArray();
    int n = values.length;
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  }

  /** Events a launch and a running rental write, with instants as the clock gives them (µs). */
  private static List<Object> sample() {
    Instant t = Instant.parse("2026-12-07T21:37:03.123456Z");
    return List.of(
        new Rental.Matched(
            new Rental.Terms(
                "host-0042", "acc_provider", List.of(3), 2_400_000, true, t, "eu-west", null),
            t),
        new Rental.Started(t.plusMillis(812), t.plusMillis(815), t.minusSeconds(30)),
        new Rental.Settled(
            new Rental.Checkpoint(10, 6_667, 5_667, 1_000, t.plusSeconds(10)), t.plusSeconds(10)),
        new Host.HeartbeatRecorded(t.plusNanos(250_000)),
        new Account.HoldConfirmed("rnt_7c1f0e2a", t.plusMillis(3)));
  }
}
