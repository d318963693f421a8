package dev.tickmark.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.metrics.EngineMetrics;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.engine.snapshot.Snapshot;
import java.io.PrintStream;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.PersistenceTestKitPlugin;
import org.apache.pekko.persistence.testkit.PersistenceTestKitSnapshotPlugin;

/**
 * How many running rentals one JVM meters, the entities alone: real {@link Rental} and {@link
 * Account} entities on Pekko's in-memory journal (no database, no HTTP, no cluster), a stub host
 * that answers liveness with a heartbeat on a 5 s grid (as agents heartbeat every 5 s, so a
 * settlement waits for the heartbeat that proves it, as on a node) and a stub matcher that matches
 * at once, so that tens of thousands of rentals start in seconds on two cores. What it shows is the
 * node's CPU per running rental and the tick lag of subscribed rentals; the database's share is
 * MarketBenchmark's (b) part, which launches through HTTP and cannot reach these sizes here.
 *
 * <p>Same-run baseline: before each size, as many plain actors with a 1 s timer each (what "every
 * rental wakes every second" costs at the least), measured over the same window. It uses only the
 * rental protocol that existed before issue 15, so the same class runs against an older build's
 * classpath for a before/after pair.
 *
 * <pre>
 * java -Xmx6g -cp bench/target/classes:cluster-config/target/tickmark-node.jar:$PERSISTENCE_TESTKIT \
 *   dev.tickmark.bench.MeterTicksBenchmark --sizes=10000,25000,50000 --window=30
 * </pre>
 */
public final class MeterTicksBenchmark {
  private static final PrintStream OUT = System.out;
  private static final long PRICE = 2_000_000; // 2.00 EUR per GPU-hour
  private static final Duration ASK = Duration.ofSeconds(60);
  private static final long HEARTBEAT_MILLIS = 5_000;

  private MeterTicksBenchmark() {}

  record Stage(
      int rentals,
      double rampSeconds,
      double seconds,
      double baselineCores,
      long[] baselineLagMicros,
      double cores,
      double machineCores,
      long settlements,
      long secondsMetered,
      long[] lagMicros,
      double heapMib,
      double rentalKib,
      double plainActorKib) {}

  public static void main(String[] argv) throws Exception {
    dev.tickmark.node.CommonPool.ensureParallelism(); // as the node's Main does
    MarketBenchSupport.quietLogs();
    int[] sizes = {10_000, 25_000};
    int window = 30;
    int probes = 100;
    int rampTimeout = 120;
    for (String a : argv) {
      if (a.startsWith("--sizes="))
        sizes =
            Arrays.stream(a.substring(8).split(",")).mapToInt(Integer::parseInt).sorted().toArray();
      else if (a.startsWith("--window=")) window = Integer.parseInt(a.substring(9));
      else if (a.startsWith("--probes=")) probes = Integer.parseInt(a.substring(9));
      else if (a.startsWith("--ramp-timeout="))
        rampTimeout = Integer.parseInt(a.substring("--ramp-timeout=".length()));
      else {
        System.err.println(
            "Usage: MeterTicksBenchmark [--sizes=10000,25000] [--window=30] [--probes=100]"
                + " [--ramp-timeout=120]");
        System.exit(2);
      }
    }
    OUT.println("== MeterTicksBenchmark ==");
    OUT.println("machine: " + MarketBenchSupport.machine());
    OUT.println("build: " + build());
    List<Stage> stages = new ArrayList<>();
    for (int k : sizes) {
      Stage s = new MeterTicksBenchmark.Run(k, window, probes, rampTimeout).run();
      stages.add(s);
      print(s);
    }
    OUT.println();
    OUT.println("== MeterTicksBenchmark summary (" + build() + ") ==");
    OUT.printf(
        Locale.ROOT,
        "%8s %7s %9s %9s %8s %10s %8s %8s %8s %9s %9s %8s %10s%n",
        "rentals",
        "ramp s",
        "settle/s",
        "metered",
        "jvm",
        "baseline",
        "vs base",
        "lag p50",
        "lag p99",
        "lag p999",
        "base p99",
        "heap MiB",
        "KiB/rental");
    for (Stage s : stages) {
      OUT.printf(
          Locale.ROOT,
          "%8d %7.1f %9.0f %9.3f %8.2f %10.2f %8.2f %8s %8s %9s %9s %8.0f %10.1f%n",
          s.rentals(),
          s.rampSeconds(),
          s.settlements() / s.seconds(),
          s.secondsMetered() / s.seconds() / s.rentals(),
          s.cores(),
          s.baselineCores(),
          s.cores() / Math.max(0.01, s.baselineCores()),
          MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.5)),
          MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.99)),
          MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.999)),
          MarketBenchSupport.ms(MarketBenchSupport.quantile(s.baselineLagMicros(), 0.99)),
          s.heapMib(),
          s.rentalKib());
    }
    OUT.println(
        "metered = seconds settled / (rentals x window), 1.0 = on time; jvm = cores this JVM used in the"
            + " window; baseline = cores of as many plain actors with a 1 s timer (same JVM, just before);"
            + " lag = tick arrival - (started_at + second) over the probed rentals; base p99 = the"
            + " baseline timers' lag");
    for (Stage s : stages) {
      String note =
          String.format(
              Locale.ROOT,
              "%,d rentals, ramp %.0f s, %.0f s window; baseline timers' lag p99 %s ms",
              s.rentals(),
              s.rampSeconds(),
              s.seconds(),
              MarketBenchSupport.ms(MarketBenchSupport.quantile(s.baselineLagMicros(), 0.99)));
      BenchResult.against(
              "meter-ticks",
              "ticks.metered@" + s.rentals(),
              "seconds metered ÷ due, " + s.rentals() + " rentals (entities, in-memory journal)",
              s.secondsMetered() / s.seconds(),
              "s/s",
              s.rentals(),
              "seconds due per second")
          .withNote(note)
          .print(OUT);
      BenchResult.absolute(
              "meter-ticks",
              "ticks.lag-p99@" + s.rentals(),
              "subscribers' tick lag p99, " + s.rentals() + " rentals",
              MarketBenchSupport.quantile(s.lagMicros(), 0.99) / 1000.0,
              "ms")
          .withNote(note)
          .print(OUT);
      BenchResult.against(
              "meter-ticks",
              "ticks.cores@" + s.rentals(),
              "JVM cores ÷ as many plain 1 s timers' cores, " + s.rentals() + " rentals",
              s.cores(),
              "cores",
              s.baselineCores(),
              "plain actors with a 1 s timer, cores")
          .withNote(note)
          .print(OUT);
      BenchResult.against(
              "meter-ticks",
              "ticks.heap-per-rental@" + s.rentals(),
              "heap a running rental holds (after GC, its events in the in-memory journal"
                  + " included) ÷ a plain actor with a 1 s timer's, "
                  + s.rentals()
                  + " rentals",
              s.rentalKib(),
              "KiB",
              s.plainActorKib(),
              "a plain actor with a 1 s timer, KiB")
          .withNote(note)
          .print(OUT);
    }
    System.exit(0);
  }

  /** Whether the rental sleeps between its instants (after issue 15) or wakes every second. */
  static String build() {
    try {
      Class.forName("dev.tickmark.engine.rental.RentalTicks");
      return "ticks computed (rentals sleep between their instants)";
    } catch (ClassNotFoundException e) {
      return "before issue 15 (every rental wakes every second)";
    }
  }

  static void print(Stage s) {
    OUT.printf(
        Locale.ROOT,
        "-- %,d rentals: ramp %.1f s; window %.0f s: settlements %,.0f/s, metered ratio %.3f, JVM %.2f cores"
            + " (machine %.2f), baseline %.2f cores; tick lag p50 %s / p99 %s / max %s ms; heap %.0f MiB"
            + " (%.1f KiB a rental, %.2f KiB a plain actor with a timer)%n",
        s.rentals(),
        s.rampSeconds(),
        s.seconds(),
        s.settlements() / s.seconds(),
        s.secondsMetered() / s.seconds() / s.rentals(),
        s.cores(),
        s.machineCores(),
        s.baselineCores(),
        MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.5)),
        MarketBenchSupport.ms(MarketBenchSupport.quantile(s.lagMicros(), 0.99)),
        MarketBenchSupport.ms(
            s.lagMicros().length == 0 ? 0 : s.lagMicros()[s.lagMicros().length - 1]),
        s.heapMib(),
        s.rentalKib(),
        s.plainActorKib());
  }

  static Config config() {
    return PersistenceTestKitPlugin.getInstance()
        .config()
        .withFallback(PersistenceTestKitSnapshotPlugin.getInstance().config())
        .withFallback(
            ConfigFactory.parseString(
                """
                pekko.loglevel = WARNING
                pekko.actor.serialization-bindings {
                  "dev.tickmark.engine.CborSerializable" = jackson-cbor
                }
                pekko.persistence.testkit.events.serialize = off
                pekko.persistence.testkit.snapshots.serialize = off
                """))
        .withFallback(ConfigFactory.load());
  }

  /** One size: a fresh actor system, the baseline, then the rentals. */
  static final class Run implements Rental.Ports {
    final int k;
    final int window;
    final int probeCount;
    final int rampTimeoutSeconds;
    final Clock clock = Clock.systemUTC();
    final ActorSystem<Void> system;
    final Map<String, ActorRef<Rental.Command>> rentals = new ConcurrentHashMap<>();
    final Map<String, ActorRef<Account.Command>> accounts = new ConcurrentHashMap<>();
    final ActorRef<Host.Command> host;
    final ActorRef<Matcher.Command> matcher;
    final AtomicInteger started = new AtomicInteger();
    final AtomicInteger launchesUnanswered = new AtomicInteger();
    final AtomicInteger launchesRefused = new AtomicInteger();

    /**
     * Renters the rentals are spread over: at most 50 live rentals each, half an account's limit
     * ({@code tickmark.accounts.max-live-rentals}, 100), which would otherwise refuse launches past
     * 20,000.
     */
    final int renters;

    final int providers = 100;

    Run(int k, int window, int probes, int rampTimeoutSeconds) {
      this.k = k;
      this.rampTimeoutSeconds = rampTimeoutSeconds;
      this.renters = Math.max(200, (k + 49) / 50);
      this.window = window;
      this.probeCount = probes;
      this.system = ActorSystem.create(Behaviors.empty(), "meter-ticks-" + k, config());
      this.host = system.systemActorOf(hostBehavior(), "host", Props.empty());
      this.matcher = system.systemActorOf(matcherBehavior(), "matcher", Props.empty());
    }

    @Override
    public RecipientRef<Account.Command> account(String accountId) {
      return accounts.get(accountId);
    }

    @Override
    public RecipientRef<Host.Command> host(String hostId) {
      return host;
    }

    @Override
    public RecipientRef<Matcher.Command> matcher(String gpu) {
      return matcher;
    }

    @Override
    public RecipientRef<Snapshot.Command> snapshot(String snapshotId) {
      return system.deadLetters();
    }

    /**
     * The last heartbeat on a 5 s grid, each rental's host at its own phase: a settlement waits for
     * the heartbeat that proves it.
     */
    Host.Liveness liveness(String rentalId) {
      long now = clock.millis();
      long phase = Math.floorMod(rentalId.hashCode(), HEARTBEAT_MILLIS);
      long last = now - Math.floorMod(now - phase, HEARTBEAT_MILLIS);
      return new Host.Liveness(true, Instant.ofEpochMilli(last));
    }

    Behavior<Host.Command> hostBehavior() {
      return Behaviors.receive(Host.Command.class)
          .onMessage(
              Host.GetLiveness.class,
              ask -> {
                ask.replyTo().tell(liveness(ask.rentalId()));
                return Behaviors.same();
              })
          .onMessage(
              Host.StartWorkload.class,
              c -> {
                c.replyTo().tell(StatusReply.ack());
                ActorRef<Rental.Command> r = rentals.get(c.rentalId());
                if (r != null) {
                  r.tell(new Rental.WorkloadStarted("host-" + c.rentalId(), clock.instant()));
                  started.incrementAndGet();
                }
                return Behaviors.same();
              })
          .onMessage(
              Host.ReleaseCards.class,
              c -> {
                c.replyTo().tell(StatusReply.<Done>ack());
                return Behaviors.same();
              })
          .onAnyMessage(c -> Behaviors.same())
          .build();
    }

    Behavior<Matcher.Command> matcherBehavior() {
      return Behaviors.receive(Matcher.Command.class)
          .onMessage(
              Matcher.Match.class,
              m -> {
                int n = Math.floorMod(m.rentalId().hashCode(), providers);
                m.replyTo()
                    .tell(
                        new Matcher.Matched(
                            m.rentalId(),
                            new Host.Reservation(
                                "host-" + m.rentalId(),
                                "provider-" + n,
                                m.rentalId(),
                                List.of(0),
                                PRICE,
                                Listing.Tier.ON_DEMAND,
                                false,
                                true,
                                "eu-nl")));
                return Behaviors.same();
              })
          .onAnyMessage(c -> Behaviors.same())
          .build();
    }

    Stage run() throws Exception {
      try {
        OUT.println();
        OUT.printf(Locale.ROOT, "== %,d running rentals ==%n", k);
        double[] base = baseline();
        openAccounts();
        heapBeforeRentalsMib = MarketBenchSupport.heapAfterGcMib();
        long r0 = System.nanoTime();
        launch();
        double ramp = (System.nanoTime() - r0) / 1e9;
        OUT.printf(Locale.ROOT, "   %,d running after %.1f s%n", started.get(), ramp);
        Thread.sleep(12_000); // every rental has settled once: the window sees the steady state
        return measure(ramp, base);
      } finally {
        system.terminate();
        system.getWhenTerminated().toCompletableFuture().get(60, TimeUnit.SECONDS);
      }
    }

    /** K plain actors with a 1 s timer each: cores used, and their timers' lag. */
    double[] baseline() throws Exception {
      LagList lags = new LagList();
      AtomicLong active = new AtomicLong();
      List<ActorRef<String>> refs = new ArrayList<>();
      double heapBefore = MarketBenchSupport.heapAfterGcMib();
      for (int i = 0; i < k; i++) {
        refs.add(
            system.systemActorOf(
                Behaviors.<String>withTimers(
                    timers -> {
                      long startNanos = System.nanoTime();
                      timers.startTimerAtFixedRate("t", "t", Duration.ofSeconds(1));
                      long[] n = {0};
                      return Behaviors.receiveMessage(
                          m -> {
                            if (m.equals("stop")) return Behaviors.stopped();
                            n[0]++;
                            if (active.get() == 1)
                              lags.add(
                                  (System.nanoTime() - (startNanos + n[0] * 1_000_000_000L))
                                      / 1_000);
                            return Behaviors.same();
                          });
                    }),
                "baseline-" + i,
                Props.empty()));
      }
      Thread.sleep(3_000);
      CpuSample c0 = CpuSample.take();
      active.set(1);
      Thread.sleep(window * 1000L);
      active.set(0);
      CpuSample c1 = CpuSample.take();
      // What one plain actor with a timer weighs: the yardstick for a rental's heap.
      plainActorKib = (MarketBenchSupport.heapAfterGcMib() - heapBefore) * 1024 / k;
      refs.forEach(r -> r.tell("stop"));
      CpuSample.Usage u = c0.until(c1);
      long[] sorted = lags.sorted();
      OUT.printf(
          Locale.ROOT,
          "   baseline: %,d plain actors with a 1 s timer: %.2f cores (machine %.2f), timer lag p99 %s ms%n",
          k,
          u.jvmCores(),
          u.machineCores(),
          MarketBenchSupport.ms(MarketBenchSupport.quantile(sorted, 0.99)));
      Thread.sleep(2_000);
      baselineLags = sorted;
      return new double[] {u.jvmCores()};
    }

    long[] baselineLags = new long[0];
    double plainActorKib;
    double heapBeforeRentalsMib;

    void openAccounts() throws Exception {
      List<CompletableFuture<?>> all = new ArrayList<>();
      for (int i = 0; i < renters; i++) all.add(open("renter-" + i, 1_000_000_000_000L));
      for (int i = 0; i < providers; i++) all.add(open("provider-" + i, 0));
      CompletableFuture.allOf(all.toArray(CompletableFuture[]::new)).get(120, TimeUnit.SECONDS);
    }

    CompletableFuture<?> open(String id, long deposit) {
      ActorRef<Account.Command> ref =
          system.systemActorOf(Account.create(id, clock), "account-" + id, Props.empty());
      accounts.put(id, ref);
      CompletableFuture<?> opened =
          AskPattern.<Account.Command, StatusReply<Account.Summary>>ask(
                  ref, r -> new Account.Open(id, r), ASK, system.scheduler())
              .toCompletableFuture();
      if (deposit == 0) return opened;
      return opened.thenCompose(
          o ->
              AskPattern.<Account.Command, StatusReply<Account.Posting>>ask(
                      ref,
                      r -> new Account.Deposit("pay-" + id, deposit, r),
                      ASK,
                      system.scheduler())
                  .toCompletableFuture());
    }

    void launch() throws Exception {
      Rental.Settings settings =
          Rental.Settings.fromConfig(
              ConfigFactory.parseString(
                      """
                      tickmark.rentals {
                        settle-interval = 10s, hold-duration = 300s, provisioning-timeout = 120s
                        stop-timeout = 30s, retry-interval = 1s, wake-interval = 30s
                      }
                      tickmark.market.fee-bps = 1500
                      tickmark.http.ask-timeout = 5s
                      """)
                  .withFallback(ConfigFactory.systemProperties())
                  .resolve());
      int batch = 500;
      for (int i = 0; i < k; i += batch) {
        List<CompletableFuture<?>> answers = new ArrayList<>();
        for (int j = i; j < Math.min(k, i + batch); j++) {
          String id = "rental-" + j;
          String renter = "renter-" + (j % renters);
          ActorRef<Rental.Command> ref =
              system.systemActorOf(Rental.create(id, settings, this, clock), id, Props.empty());
          rentals.put(id, ref);
          Rental.Spec spec =
              new Rental.Spec(
                  "h100-80gb",
                  1,
                  Listing.Tier.ON_DEMAND,
                  "eu-nl",
                  3_000_000,
                  "img",
                  List.of("run"),
                  "ssh-ed25519 AAAA",
                  null,
                  30,
                  false);
          answers.add(
              AskPattern.<Rental.Command, StatusReply<Rental.View>>ask(
                      ref, r -> new Rental.Create(renter, spec, r), ASK, system.scheduler())
                  .toCompletableFuture()
                  .thenApply(
                      reply -> {
                        if (reply.isError()) launchesRefused.incrementAndGet();
                        return reply;
                      })
                  .exceptionally(
                      failure -> {
                        launchesUnanswered.incrementAndGet(); // counted; the rest go on
                        return null;
                      }));
        }
        CompletableFuture.allOf(answers.toArray(CompletableFuture[]::new))
            .get(300, TimeUnit.SECONDS);
      }
      if (launchesUnanswered.get() > 0)
        OUT.printf(
            Locale.ROOT,
            "   %,d launches unanswered within %d s (the node could not keep up)%n",
            launchesUnanswered.get(),
            ASK.toSeconds());
      if (launchesRefused.get() > 0)
        OUT.printf(Locale.ROOT, "   %,d launches refused%n", launchesRefused.get());
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(rampTimeoutSeconds);
      while (started.get() < k && System.nanoTime() < deadline) Thread.sleep(100);
    }

    Stage measure(double ramp, double[] base) throws Exception {
      EngineMetrics metrics = EngineMetrics.get(system);
      LagList lags = new LagList();
      AtomicLong active = new AtomicLong();
      List<CompletableFuture<?>> subscribed = new ArrayList<>();
      for (int i = 0; i < probeCount; i++) {
        String id = "rental-" + (int) ((long) i * k / probeCount);
        long[] startedAtMicros = {0};
        long[] last = {-1};
        ActorRef<Rental.Update> probe =
            system.systemActorOf(
                Behaviors.receive(Rental.Update.class)
                    .onMessage(
                        Rental.Tick.class,
                        t -> {
                          long now = Host.micros(Instant.now());
                          if (active.get() == 1 && startedAtMicros[0] > 0 && last[0] >= 0)
                            for (long s = last[0] + 1; s <= t.second(); s++)
                              lags.add(now - (startedAtMicros[0] + s * 1_000_000L));
                          last[0] = Math.max(last[0], t.second());
                          return Behaviors.same();
                        })
                    .onAnyMessage(m -> Behaviors.same())
                    .build(),
                "probe-" + i,
                Props.empty());
        subscribed.add(
            AskPattern.<Rental.Command, StatusReply<Rental.View>>ask(
                    rentals.get(id),
                    r -> new Rental.Subscribe(null, probe, r),
                    ASK,
                    system.scheduler())
                .toCompletableFuture()
                .thenAccept(
                    v ->
                        startedAtMicros[0] =
                            v.getValue().startedAt() == null
                                ? 0
                                : Host.micros(v.getValue().startedAt())));
      }
      CompletableFuture.allOf(subscribed.toArray(CompletableFuture[]::new))
          .get(60, TimeUnit.SECONDS);
      Thread.sleep(2_000);
      long set0 = metrics.settlements.sum();
      long met0 = metrics.secondsMetered.sum();
      CpuSample c0 = CpuSample.take();
      long t0 = System.nanoTime();
      active.set(1);
      Thread.sleep(window * 1000L);
      active.set(0);
      long t1 = System.nanoTime();
      CpuSample c1 = CpuSample.take();
      long set1 = metrics.settlements.sum();
      long met1 = metrics.secondsMetered.sum();
      CpuSample.Usage u = c0.until(c1);
      double heap = MarketBenchSupport.heapAfterGcMib();
      return new Stage(
          Math.min(k, started.get()),
          ramp,
          (t1 - t0) / 1e9,
          base[0],
          baselineLags,
          u.jvmCores(),
          u.machineCores(),
          set1 - set0,
          met1 - met0,
          lags.sorted(),
          heap,
          (heap - heapBeforeRentalsMib) * 1024 / k,
          plainActorKib);
    }
  }

  /** Lags in microseconds, from many actors. */
  static final class LagList {
    private long[] values = new long[1 << 16];
    private int size;

    synchronized void add(long micros) {
      if (size == values.length) values = Arrays.copyOf(values, size * 2);
      values[size++] = micros;
    }

    synchronized long[] sorted() {
      long[] a = Arrays.copyOf(values, size);
      Arrays.sort(a);
      return a;
    }
  }
}
