package dev.tickmark.engine.sim;

import static java.nio.charset.StandardCharsets.UTF_8;

import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.WorkloadNeeds;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.engine.market.Matcher;
import dev.tickmark.engine.rental.Rental;
import dev.tickmark.engine.sim.SimNetwork.Link;
import dev.tickmark.engine.snapshot.Snapshot;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import dev.tickmark.wire.HardwareReport;
import java.security.KeyPair;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.DayOfWeek;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.PersistenceTestKitSnapshotPlugin;

/**
 * A whole market in one JVM, run deterministically from a seed (after TigerBeetle's VOPR and
 * FoundationDB's simulation testing): the real {@link Account}, {@link Host}, {@link Matcher} and
 * {@link Rental} entities on the in-memory journal, spawned directly (no sharding) and respawned on
 * demand after a crash; every dispatcher runs on one {@link SimLoop} driven by this thread, on
 * virtual time; messages between entities cross a {@link SimNetwork} that loses, delays, reorders
 * and duplicates them; simulated agents heartbeat, run workloads and fall silent; renters deposit,
 * launch and stop; providers re-price, reclaim and get paid; entities crash, the whole node is
 * lost, the wall clock jumps. After every step the {@link Auditor} checks the books. See {@code
 * docs/simulation.md}.
 */
public final class MarketSimulation implements AutoCloseable {
  static final Instant EPOCH = Instant.parse("2026-03-02T08:00:00Z"); // a Monday
  static final List<String> GPUS = List.of("h100-80gb", "a100-80gb");
  static final List<String> REGIONS = List.of("eu-nl", "eu-de");
  static final int FEE_BPS = 1_500;
  static final Duration HEARTBEAT_TIMEOUT = Duration.ofSeconds(30);
  static final int HEARTBEAT_SECONDS = 5;

  /**
   * {@code -Dsim.settle-stretch-from=N}: the settle interval grows from N running rentals (up to 60
   * s, issue 15), so a run with a handful of rentals settles as a loaded node would; 0 (the
   * default): never, as the suite runs.
   */
  static final int SETTLE_STRETCH_FROM = Integer.getInteger("sim.settle-stretch-from", 0);

  static final Rental.Settings RENTAL =
      new Rental.Settings(
          Duration.ofSeconds(10),
          300,
          FEE_BPS,
          Duration.ofSeconds(120),
          Duration.ofSeconds(30),
          Duration.ofSeconds(1),
          Duration.ofSeconds(5),
          Rental.Settings.DEFAULT_MAX_WAKE_GAP,
          SETTLE_STRETCH_FROM > 0 ? Duration.ofSeconds(60) : Duration.ofSeconds(10),
          SETTLE_STRETCH_FROM);

  /**
   * Storage at 100 µ€ per GiB-second (1–8 GiB snapshots cost 0.36–2.88 EUR an hour, so renters'
   * balances run out and snapshots are suspended and resumed), settled every minute from a hold of
   * ten minutes; an upload has 10 minutes, a suspended snapshot 20 minutes before it is deleted.
   */
  static final long GIB = 1L << 30;

  static final Snapshot.Settings SNAPSHOTS =
      new Snapshot.Settings(
          259_200_000,
          8 * GIB,
          20 * GIB,
          Duration.ofSeconds(60),
          600,
          Duration.ofMinutes(10),
          Duration.ofSeconds(20),
          Duration.ofMinutes(20),
          Duration.ofSeconds(5));

  /**
   * What a stopping rental may take beyond its stop timeout to finish its money (redeliveries back
   * off to ~10 s each).
   */
  static final Duration CLOSE_SLACK = Duration.ofSeconds(90);

  /**
   * One run's world and faults. {@code switchedOff}: invariants not enforced (e.g. to look past a
   * known bug). {@code livenessFaults} (in {@code network}) and {@code partitions} are the fault
   * kinds behind the two known bugs.
   */
  public record Config(
      long seed,
      int renters,
      int providers,
      int hosts,
      SimNetwork.Faults network,
      boolean crashes,
      boolean nodeLoss,
      boolean agentFaults,
      boolean clockJumps,
      boolean partitions,
      boolean payouts,
      Set<String> switchedOff,
      int traceLines,
      boolean snapshots,
      boolean clockStepsBack,
      boolean refunds) {
    /**
     * {@code refunds}: an operator also refunds closed rentals, in parts, retried, sometimes asking
     * for more than is left; off, the runs are as they were before refunds (the same draws).
     */
    public Config(
        long seed,
        int renters,
        int providers,
        int hosts,
        SimNetwork.Faults network,
        boolean crashes,
        boolean nodeLoss,
        boolean agentFaults,
        boolean clockJumps,
        boolean partitions,
        boolean payouts,
        Set<String> switchedOff,
        int traceLines,
        boolean snapshots,
        boolean clockStepsBack) {
      this(
          seed,
          renters,
          providers,
          hosts,
          network,
          crashes,
          nodeLoss,
          agentFaults,
          clockJumps,
          partitions,
          payouts,
          switchedOff,
          traceLines,
          snapshots,
          clockStepsBack,
          false);
    }

    /** Without backward clock steps: the runs as they were before the clock could step back. */
    public Config(
        long seed,
        int renters,
        int providers,
        int hosts,
        SimNetwork.Faults network,
        boolean crashes,
        boolean nodeLoss,
        boolean agentFaults,
        boolean clockJumps,
        boolean partitions,
        boolean payouts,
        Set<String> switchedOff,
        int traceLines,
        boolean snapshots) {
      this(
          seed,
          renters,
          providers,
          hosts,
          network,
          crashes,
          nodeLoss,
          agentFaults,
          clockJumps,
          partitions,
          payouts,
          switchedOff,
          traceLines,
          snapshots,
          false,
          false);
    }

    /**
     * The wall clock also steps back (1–120 s, or an hour) and forward an hour, besides its forward
     * jumps of 1–120 s.
     */
    public Config withClockStepsBack() {
      return with(seed, network, switchedOff, traceLines, snapshots, true);
    }

    /** The same run, its report keeping the last {@code lines} lines of the trace. */
    public Config withTraceLines(int lines) {
      return with(seed, network, switchedOff, lines, snapshots, clockStepsBack);
    }

    /** Without snapshots: the runs as they were before renters could keep a workspace. */
    public Config(
        long seed,
        int renters,
        int providers,
        int hosts,
        SimNetwork.Faults network,
        boolean crashes,
        boolean nodeLoss,
        boolean agentFaults,
        boolean clockJumps,
        boolean partitions,
        boolean payouts,
        Set<String> switchedOff,
        int traceLines) {
      this(
          seed,
          renters,
          providers,
          hosts,
          network,
          crashes,
          nodeLoss,
          agentFaults,
          clockJumps,
          partitions,
          payouts,
          switchedOff,
          traceLines,
          false);
    }

    /** These invariants not enforced (still counted). */
    public Config withSwitchedOff(String... invariants) {
      Set<String> off = new java.util.TreeSet<>(switchedOff);
      off.addAll(List.of(invariants));
      return with(seed, network, Set.copyOf(off), traceLines, snapshots, clockStepsBack);
    }

    /**
     * Renters also keep workspaces (a quarter of their stops), agents upload them, renters delete
     * them; storage is metered and its money audited.
     */
    public Config withSnapshots() {
      return with(seed, network, switchedOff, traceLines, true, clockStepsBack);
    }

    /** Every fault on. */
    public static Config of(long seed) {
      SimNetwork.Faults network =
          new SimNetwork.Faults(0.02, 0.03, 1500, 0.2, true, true, true, true, true);
      return new Config(seed, 6, 3, 6, network, true, true, true, true, true, true, Set.of(), 40);
    }

    /** No faults at all: the market as it runs on a good day. */
    public static Config calm(long seed) {
      return new Config(
          seed,
          6,
          3,
          6,
          SimNetwork.Faults.NONE,
          false,
          false,
          false,
          false,
          false,
          true,
          Set.of(),
          40);
    }

    /**
     * Every fault but the kinds that expose bugs found and not yet fixed (docs/simulation.md), and
     * every invariant but those such bugs break. A to I are fixed and B's remainder was the
     * auditor's (it did not allow for wall clock jumps), so this is every fault and every
     * invariant; kept so that a newly found bug can be switched off here until it is fixed.
     */
    public Config withoutKnownBugs() {
      Set<String> off = new java.util.TreeSet<>(switchedOff);
      return with(
          seed, network.withoutKnownBugs(), Set.copyOf(off), traceLines, snapshots, clockStepsBack);
    }

    public Config withSeed(long s) {
      return with(s, network, switchedOff, traceLines, snapshots, clockStepsBack);
    }

    /** This configuration with the components the {@code with…} methods change. */
    private Config with(
        long seed,
        SimNetwork.Faults network,
        Set<String> switchedOff,
        int traceLines,
        boolean snapshots,
        boolean clockStepsBack) {
      return with(seed, network, switchedOff, traceLines, snapshots, clockStepsBack, refunds);
    }

    private Config with(
        long seed,
        SimNetwork.Faults network,
        Set<String> switchedOff,
        int traceLines,
        boolean snapshots,
        boolean clockStepsBack,
        boolean refunds) {
      return new Config(
          seed,
          renters,
          providers,
          hosts,
          network,
          crashes,
          nodeLoss,
          agentFaults,
          clockJumps,
          partitions,
          payouts,
          switchedOff,
          traceLines,
          snapshots,
          clockStepsBack,
          refunds);
    }

    /** An operator also refunds closed rentals (see {@code refunds}). */
    public Config withRefunds() {
      return with(seed, network, switchedOff, traceLines, snapshots, clockStepsBack, true);
    }

    public String faults() {
      return "network(drop="
          + network.drop()
          + " dup="
          + network.duplicate()
          + " delay≤"
          + network.maxDelayMillis()
          + "ms replies="
          + network.replyFaults()
          + " reorder="
          + network.reorder()
          + " liveness="
          + network.livenessFaults()
          + " lossyTells="
          + network.lossyTells()
          + " lateAgentReports="
          + network.lateAgentReports()
          + " lateHostNotices="
          + network.lateHostNotices()
          + ") crashes="
          + crashes
          + " nodeLoss="
          + nodeLoss
          + " agent="
          + agentFaults
          + " clockJumps="
          + clockJumps
          + (clockStepsBack ? " clockStepsBack=true" : "")
          + " partitions="
          + partitions;
    }
  }

  /**
   * {@code stepDigests}: the trace hash as it stood after each step (its first 12 hex digits), so
   * that two runs of one seed that differ show the step where they parted.
   */
  public record Result(
      long seed,
      long steps,
      String traceHash,
      List<Auditor.Violation> violations,
      String trace,
      Map<String, Long> stats,
      List<String> stepDigests) {
    public boolean ok() {
      return violations.isEmpty();
    }

    public String report() {
      StringBuilder b = new StringBuilder();
      b.append("seed ")
          .append(seed)
          .append(": ")
          .append(ok() ? "ok" : violations.size() + " violation(s)")
          .append(" after ")
          .append(steps)
          .append(" steps, trace ")
          .append(traceHash, 0, 16)
          .append('\n');
      violations.stream().limit(5).forEach(v -> b.append("  ").append(v).append('\n'));
      if (!ok()) b.append("last steps (reproduce with the same seed and config):\n").append(trace);
      return b.toString();
    }
  }

  // ---------------------------------------------------------------------------------------------

  final Config config;
  final SimLoop loop;
  final SimClock clock;
  final ActorSystem<Void> system;
  final SimNetwork network;
  final SplittableRandom random;
  final Auditor auditor;
  private final Catalog catalog = Catalog.load();
  private final Verification.Policy policy = Verification.Policy.defaults(false);
  private final MessageDigest digest;
  private final ArrayDeque<String> trace = new ArrayDeque<>();
  private final List<String> stepDigests = new ArrayList<>();
  private final Map<String, Long> stats = new TreeMap<>();
  long step;
  private boolean resting;

  private final Map<String, Slot<Account.Command>> accounts = new LinkedHashMap<>();
  private final Map<String, Slot<Host.Command>> hosts = new LinkedHashMap<>();
  private final Map<String, Slot<Matcher.Command>> matchers = new LinkedHashMap<>();
  private final Map<String, Slot<Rental.Command>> rentals = new LinkedHashMap<>();
  private final Map<String, Slot<Snapshot.Command>> snapshots = new LinkedHashMap<>();
  private final Map<String, Agent> agents = new LinkedHashMap<>();
  private final List<String> renterIds = new ArrayList<>();
  private final List<String> providerIds = new ArrayList<>();
  private final Map<String, Instant> lastProof = new TreeMap<>();
  private final Map<String, List<Instant>> reportedStops = new TreeMap<>();
  // Per rental: when the latest heartbeat that listed its workload reached its host, in virtual
  // milliseconds (wall clock jumps are no time the workload ran).
  private final Map<String, Long> lastListed = new TreeMap<>();
  // Per rental: the latest clock reading of a heartbeat that listed it (a step back does not take a
  // listing back: the seconds it proved stay proven).
  private final Map<String, Instant> latestListedOnTheClock = new TreeMap<>();
  // Per rental: when the first heartbeat after that one that no longer listed it reached the host.
  private final Map<String, Long> goneSince = new TreeMap<>();
  private final Map<String, Long> endedAtVirtual = new TreeMap<>();
  // Per host: the rentals its latest heartbeats listed.
  private final Map<String, Set<String>> listedOn = new TreeMap<>();
  private final Map<String, Long> depositsMade = new TreeMap<>();
  private final Map<String, Long> payoutsMade = new TreeMap<>();
  private final Map<String, Account.Summary> summaries = new TreeMap<>();

  /** Journal writes of each account so far, and how many there had been when it last answered. */
  private final Map<String, Long> accountWrites = new TreeMap<>();

  private final Map<String, Long> writesAtSummary = new TreeMap<>();
  private final ActorRef<Object> sink;
  private final ActorRef<Account.Summary> summaryCollector;
  private final Host.RentalLink rentalLink;
  private long names;

  public MarketSimulation(Config config) {
    this.config = config;
    this.random = new SplittableRandom(config.seed());
    this.loop = SimLoop.create();
    this.clock = new SimClock(loop, EPOCH);
    try {
      this.digest = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
    loop.journalListener = this::onJournalWrite;
    this.system =
        loop.pumpedWhile(
            () ->
                ActorSystem.create(
                    Behaviors.<Void>empty(),
                    "sim",
                    ConfigFactory.parseString(hocon(loop.id))
                        .withFallback(PersistenceTestKitSnapshotPlugin.config())
                        .withFallback(ConfigFactory.defaultReference())));
    loop.runUntilQuiet();
    loop.ownedBy(Thread.currentThread());
    this.network = new SimNetwork(loop, random.split(), system, config.network());
    this.auditor =
        new Auditor(
            FEE_BPS,
            Duration.ofMillis(config.network().maxDelayMillis() + 1000),
            lastProof::get,
            id -> reportedStops.getOrDefault(id, List.of()),
            this::lastListedOnTheClock,
            this::goneOnTheClock,
            this::goneBeforeTheEnd,
            clock::jumpedForwardMillis,
            () -> step,
            config.switchedOff());
    this.sink =
        system.systemActorOf(
            Behaviors.<Object>receiveMessage(m -> Behaviors.same()), "sink", Props.empty());
    this.summaryCollector =
        system.systemActorOf(
            Behaviors.<Account.Summary>receiveMessage(
                s -> {
                  summaries.put(s.id(), s);
                  writesAtSummary.put(s.id(), accountWrites.getOrDefault(s.id(), 0L));
                  return Behaviors.same();
                }),
            "summaries",
            Props.empty());
    this.rentalLink =
        new Host.RentalLink() {
          @Override
          public void hostLost(String rentalId, String hostId, Instant lastHeartbeatAt) {
            hostLost(rentalId, hostId, lastHeartbeatAt, null);
          }

          @Override
          public void hostLost(
              String rentalId, String hostId, Instant lastHeartbeatAt, Instant lostAt) {
            fromHost(hostId, rentalId, new Rental.HostLost(hostId, lastHeartbeatAt, lostAt));
          }

          @Override
          public void preempt(String rentalId, String hostId, Instant deadline) {
            fromHost(hostId, rentalId, new Rental.Preempt(hostId, deadline));
          }

          @Override
          public void checkReservation(
              String rentalId, String hostId, ActorRef<Host.ReservationWanted> replyTo) {
            fromHost(hostId, rentalId, new Rental.CheckReservation(hostId, replyTo));
          }

          @Override
          public void hostAttached(String rentalId, String hostId) {
            fromHost(hostId, rentalId, new Rental.HostAttached(hostId));
          }
        };
    setUp();
  }

  /**
   * When the latest heartbeat that listed rental {@code id}'s workload reached its host, on the
   * entities' clock as it reads now: the wall clock jumps since then are added, as they are to
   * every instant the rental measures after it.
   */
  private Instant lastListedOnTheClock(String id) {
    Instant mapped = onTheClock(lastListed.get(id));
    Instant latest = latestListedOnTheClock.get(id);
    return mapped == null || latest == null || mapped.isAfter(latest) ? mapped : latest;
  }

  private Instant goneOnTheClock(String id) {
    return onTheClock(goneSince.get(id));
  }

  /**
   * Whether the first heartbeat that no longer listed rental {@code id}'s workload reached its host
   * before the rental's end instant, in the order things happened: a clock stepped back between the
   * two can put the omission's clock reading before an end it followed.
   */
  private boolean goneBeforeTheEnd(String id, Instant endAt) {
    Long gone = goneSince.get(id);
    if (gone == null) return false;
    Long end = endedAtVirtual.get(id);
    return end == null ? onTheClock(gone).isBefore(endAt) : gone < end;
  }

  private Instant onTheClock(Long virtualMillis) {
    if (virtualMillis == null) return null;
    // Forward jumps since then are added; a step back does not move it below what the clock read.
    long jumped = Math.max(clock.jumpedMillis(), clock.jumpedAt(virtualMillis));
    return EPOCH.plusMillis(virtualMillis + jumped);
  }

  static String hocon(String loopId) {
    String executor =
        "type = Dispatcher\n executor = \"dev.tickmark.engine.sim.SimLoop$Executor\"\n sim-loop-id = \""
            + loopId
            + "\"\n";
    return "tickmark.sim.loop-id = \""
        + loopId
        + "\"\n"
        + "tickmark-sim-journal { class = \"dev.tickmark.engine.sim.SimJournal\"\n"
        + " plugin-dispatcher = \"pekko.actor.default-dispatcher\" }\n"
        + "tickmark-sim-logging { type = Dispatcher\n executor = \"thread-pool-executor\"\n thread-pool-executor.fixed-pool-size = 1 }\n"
        + "pekko {\n loglevel = WARNING\n log-dead-letters = off\n log-dead-letters-during-shutdown = off\n"
        + " loggers-dispatcher = \"tickmark-sim-logging\"\n jvm-shutdown-hooks = off\n"
        + " coordinated-shutdown.run-by-jvm-shutdown-hook = off\n"
        + " scheduler.implementation = \"dev.tickmark.engine.sim.SimLoop$Scheduler\"\n"
        + " persistence.journal.plugin = \"tickmark-sim-journal\"\n"
        + " actor {\n provider = local\n allow-java-serialization = off\n"
        + "  serialization-bindings { \"dev.tickmark.engine.CborSerializable\" = jackson-cbor }\n"
        + "  default-dispatcher { "
        + executor
        + " }\n"
        + "  internal-dispatcher { "
        + executor
        + " }\n"
        + "  default-blocking-io-dispatcher { "
        + executor
        + " }\n }\n"
        + " persistence.dispatchers {\n default-plugin-dispatcher { "
        + executor
        + " }\n"
        + "  default-replay-dispatcher { "
        + executor
        + " }\n  default-stream-dispatcher { "
        + executor
        + " }\n }\n"
        + "}\n";
  }

  // ---------------------------------------------------------------------------------------------
  // Entities: spawned directly, one slot per id, respawned on demand after a crash (as sharding
  // would).

  final class Slot<C> {
    final String kind;
    final String id;
    private final Supplier<Behavior<C>> factory;
    private ActorRef<C> ref;
    private final Map<String, ActorRef<C>> ports = new TreeMap<>();
    private int incarnation;

    Slot(String kind, String id, Supplier<Behavior<C>> factory) {
      this.kind = kind;
      this.id = id;
      this.factory = factory;
    }

    ActorRef<C> live() {
      if (ref == null) {
        ref =
            system.systemActorOf(
                factory.get(), kind + "-" + id + "-" + (++incarnation), Props.empty());
        count("spawns");
      }
      return ref;
    }

    boolean alive() {
      return ref != null;
    }

    void crash() {
      if (ref == null) return;
      Adapter.toClassic(system).stop(Adapter.toClassic(ref));
      ref = null;
      count("crashes");
    }

    String endpoint() {
      return kind + ":" + id;
    }
  }

  Slot<Account.Command> account(String id) {
    return accounts.computeIfAbsent(
        id, k -> new Slot<>("account", k, () -> Account.create(k, clock)));
  }

  Slot<Host.Command> host(String id) {
    return hosts.computeIfAbsent(
        id,
        k ->
            new Slot<>(
                "host",
                k,
                () ->
                    Host.create(
                        k,
                        new Host.Settings(
                            HEARTBEAT_TIMEOUT, HEARTBEAT_SECONDS, catalog, policy, rentalLink),
                        clock)));
  }

  Slot<Matcher.Command> matcher(String gpu) {
    return matchers.computeIfAbsent(
        gpu,
        k ->
            new Slot<>(
                "matcher",
                k,
                () ->
                    Matcher.create(
                        this::candidates,
                        hostId -> port(Link.MATCHER_TO_HOST, "matcher:" + k, host(hostId)),
                        new Matcher.Settings(
                            RENTAL.askTimeout(),
                            16,
                            10_000,
                            Duration.ofSeconds(-1)), // no read side lag: never steer by guess
                        clock)));
  }

  Slot<Rental.Command> rental(String id) {
    return rentals.computeIfAbsent(
        id, k -> new Slot<>("rental", k, () -> Rental.create(k, RENTAL, portsOf(k), clock)));
  }

  /** A rental's own links to the others, so the network knows who sends (for per-pair ordering). */
  private Rental.Ports portsOf(String rentalId) {
    String from = "rental:" + rentalId;
    return new Rental.Ports() {
      @Override
      public RecipientRef<Account.Command> account(String accountId) {
        return port(Link.RENTAL_TO_ACCOUNT, from, MarketSimulation.this.account(accountId));
      }

      @Override
      public RecipientRef<Host.Command> host(String hostId) {
        return port(Link.RENTAL_TO_HOST, from, MarketSimulation.this.host(hostId));
      }

      @Override
      public RecipientRef<Matcher.Command> matcher(String gpu) {
        return port(Link.RENTAL_TO_MATCHER, from, MarketSimulation.this.matcher(gpu));
      }

      @Override
      public RecipientRef<Snapshot.Command> snapshot(String id) {
        return port(Link.RENTAL_TO_SNAPSHOT, from, MarketSimulation.this.snapshot(id));
      }
    };
  }

  Slot<Snapshot.Command> snapshot(String id) {
    return snapshots.computeIfAbsent(
        id,
        k -> {
          count("snapshots");
          return new Slot<>(
              "snapshot", k, () -> Snapshot.create(k, SNAPSHOTS, snapshotPortsOf(k), clock));
        });
  }

  private Snapshot.Ports snapshotPortsOf(String snapshotId) {
    String from = "snapshot:" + snapshotId;
    return new Snapshot.Ports() {
      @Override
      public RecipientRef<Account.Command> account(String accountId) {
        return port(Link.SNAPSHOT_TO_ACCOUNT, from, MarketSimulation.this.account(accountId));
      }

      @Override
      public RecipientRef<Host.Command> host(String hostId) {
        return port(Link.SNAPSHOT_TO_HOST, from, MarketSimulation.this.host(hostId));
      }
    };
  }

  /**
   * An actor standing for the network link to {@code slot}: what it is told crosses the {@link
   * SimNetwork}.
   */
  private <C> ActorRef<C> port(Link link, String from, Slot<C> slot) {
    return slot.ports.computeIfAbsent(
        from + " " + link,
        l ->
            system.systemActorOf(
                Behaviors.<C>receiveMessage(
                    m -> {
                      send(m instanceof Host.GetLiveness ? Link.LIVENESS : link, from, slot, m);
                      return Behaviors.same();
                    }),
                "port-" + (names++),
                Props.empty()));
  }

  private <C> void send(Link link, String from, Slot<C> slot, C message) {
    network.send(link, from, slot.endpoint(), message, m -> deliver(slot, m));
  }

  private <C> void deliver(Slot<C> slot, C message) {
    if (message instanceof Host.Heartbeat || message instanceof Host.Attach)
      // The latest proof: a clock stepped back does not take back what was proven.
      lastProof.merge(slot.id, clock.instant(), (a, b) -> a.isAfter(b) ? a : b);
    if (message instanceof Host.Heartbeat hb && hb.rentals() != null) {
      for (String id : hb.rentals()) {
        lastListed.put(id, loop.nowMillis());
        latestListedOnTheClock.merge(id, clock.instant(), (a, b) -> a.isAfter(b) ? a : b);
        goneSince.remove(id);
      }
      Set<String> listedHere = listedOn.computeIfAbsent(slot.id, k -> new java.util.TreeSet<>());
      for (java.util.Iterator<String> it = listedHere.iterator(); it.hasNext(); ) {
        String id = it.next();
        if (hb.rentals().contains(id)) continue;
        goneSince.putIfAbsent(id, loop.nowMillis());
        it.remove();
      }
      listedHere.addAll(hb.rentals());
    }
    if (message instanceof Rental.WorkloadStopped s)
      reportedStops.computeIfAbsent(slot.id, k -> new ArrayList<>()).add(s.at());
    slot.live().tell(message);
  }

  /**
   * What one command of a host tells its rentals is sent at the end of that command, by rental id
   * (since 2026-12-04 the host iterates its reservations by rental id itself; before, a {@code
   * Map.copyOf} iterated them in an order the JDK salts per JVM).
   */
  private final Map<String, List<Map.Entry<String, Rental.Command>>> hostNotices = new TreeMap<>();

  private void fromHost(String hostId, String rentalId, Rental.Command command) {
    List<Map.Entry<String, Rental.Command>> pending =
        hostNotices.computeIfAbsent(hostId, k -> new ArrayList<>());
    if (pending.isEmpty()) {
      loop.atEndOfTask(
          () -> {
            List<Map.Entry<String, Rental.Command>> all =
                new ArrayList<>(hostNotices.remove(hostId));
            all.sort(Map.Entry.comparingByKey());
            all.forEach(
                e -> toRental(Link.HOST_TO_RENTAL, "host:" + hostId, e.getKey(), e.getValue()));
          });
    }
    pending.add(Map.entry(rentalId, command));
  }

  private void toRental(Link link, String from, String rentalId, Rental.Command command) {
    if (!rentals.containsKey(rentalId)) return;
    send(link, from, rental(rentalId), command);
  }

  /**
   * The host read side, with no lag: the hosts' state as their journals say, as the matcher's query
   * would find it.
   */
  private CompletableFuture<List<Matcher.Candidate>> candidates(
      String gpu,
      String region,
      Listing.Tier tier,
      long maxPrice,
      int count,
      String renterId,
      WorkloadNeeds needs, // every simulated host runs rentals with network; none asks a runtime
      Matcher.Holdings held) {
    List<Matcher.Candidate> found = new ArrayList<>();
    Instant now = clock.instant();
    for (Map.Entry<String, Auditor.HostBook> e : auditor.hosts.entrySet()) {
      Auditor.HostBook h = e.getValue();
      if (h.status != Host.Status.VERIFIED
          || !h.online
          || !h.listing.listed()
          || h.draining
          || !gpu.equals(h.gpu)) continue;
      if (region != null && !region.equals(h.region)) continue;
      if (renterId != null && renterId.equals(h.ownerId)) continue; // never the renter's own host
      Long floor = h.listing.floorFor(tier);
      if (floor == null || floor > maxPrice || !h.listing.availableAt(now)) continue;
      int free = h.cards - h.reservations.values().stream().mapToInt(List::size).sum();
      if (free >= count) found.add(new Matcher.Candidate(e.getKey(), floor, free, now));
    }
    return CompletableFuture.completedFuture(found);
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private <T> ActorRef<T> sink() {
    return (ActorRef) sink;
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private <T> ActorRef<T> once(Consumer<Object> then) {
    return (ActorRef)
        system.systemActorOf(
            Behaviors.receiveMessage(
                m -> {
                  then.accept(m);
                  return Behaviors.stopped();
                }),
            "once-" + (names++),
            Props.empty());
  }

  // ---------------------------------------------------------------------------------------------
  // The journal: every write is audited and hashed into the trace.

  private static final java.io.PrintStream DUMP = dump();

  private static java.io.PrintStream dump() {
    String file = System.getProperty("sim.dump");
    try {
      return file == null
          ? null
          : new java.io.PrintStream(new java.io.FileOutputStream(file), true, UTF_8);
    } catch (java.io.IOException e) {
      throw new IllegalStateException(e);
    }
  }

  private void onJournalWrite(String pid, List<Object> batch) {
    count("journal writes");
    if (pid.startsWith("Account|")) accountWrites.merge(pid.substring(8), 1L, Long::sum);
    for (Object e : batch) {
      if (DUMP != null)
        DUMP.println(
            "    journal " + pid + " " + (e instanceof Host.Registered ? "Registered" : e));
      // A registration's credential and the agent's key are random by design; their hashes do not
      // steer anything.
      String text = e instanceof Host.Registered ? "Registered" : e.toString();
      digest.update((pid + " " + text + "\n").getBytes(UTF_8));
      if (e instanceof Rental.Ended ended) {
        // when the end instant was, in the simulation's own time: the clock's reading at the write,
        // less how far before it the end lies (a step of the clock in between is not undone)
        endedAtVirtual.put(
            pid.substring(pid.indexOf('|') + 1),
            loop.nowMillis() - Duration.between(ended.endAt(), clock.instant()).toMillis());
        note(
            "  "
                + pid
                + " ended "
                + ended.reason()
                + " at "
                + ended.endAt()
                + " billed "
                + ended.billedSeconds()
                + " s");
      }
      if (e instanceof Rental.Started s) note("  " + pid + " started at " + s.startedAt());
      if (e instanceof Host.WentOffline off)
        note("  " + pid + " offline, last heartbeat " + off.lastHeartbeatAt());
    }
    auditor.onWrite(pid, batch);
  }

  /** The trace hash of everything so far, without ending the digest. */
  private String digestSoFar() {
    try {
      byte[] hash = ((MessageDigest) digest.clone()).digest();
      return HexFormat.of().formatHex(hash, 0, 6);
    } catch (CloneNotSupportedException e) {
      throw new IllegalStateException(e);
    }
  }

  private void note(String line) {
    String stamped =
        String.format(
            "#%d %s %s",
            step, Duration.ofMillis(loop.nowMillis()).toString().substring(2).toLowerCase(), line);
    digest.update(stamped.getBytes(UTF_8));
    trace.add(stamped);
    if (trace.size() > config.traceLines()) trace.poll();
    if (DUMP != null) DUMP.println(stamped);
  }

  private void count(String what) {
    stats.merge(what, 1L, Long::sum);
  }

  // ---------------------------------------------------------------------------------------------
  // Set-up: accounts, hosts verified and listed, agents heartbeating.

  private void setUp() {
    for (int i = 1; i <= config.renters(); i++) renterIds.add("renter-" + i);
    for (int i = 1; i <= config.providers(); i++) providerIds.add("prov-" + i);
    for (String id : renterIds) account(id).live().tell(new Account.Open("Renter " + id, sink()));
    for (String id : providerIds)
      account(id).live().tell(new Account.Open("Provider " + id, sink()));
    loop.runUntilQuiet();
    for (int i = 1; i <= config.hosts(); i++) {
      String id = "h" + i;
      String gpu = GPUS.get(i % GPUS.size());
      Agent a =
          new Agent(
              id,
              providerIds.get(i % providerIds.size()),
              REGIONS.get((i / 2) % REGIONS.size()),
              gpu,
              2 + random.nextInt(7));
      agents.put(id, a);
      ActorRef<Host.Command> h = host(id).live();
      h.tell(
          new Host.Invite(
              a.ownerId,
              a.region,
              "rack-" + i,
              Host.sha256("tok-" + id),
              EPOCH.plus(Duration.ofDays(1)),
              sink()));
      h.tell(
          new Host.Register(
              Host.sha256("tok-" + id), Ed25519.encodePublic(a.key.getPublic()), sink()));
      loop.runUntilQuiet();
      a.connect(true);
      loop.runUntilQuiet();
      String canonical = new String(CanonicalJson.bytes(Frames.reportTree(a.report())), UTF_8);
      h.tell(
          new Host.VerifyReport(
              a.session,
              a.report(),
              canonical,
              Ed25519.sign(a.key.getPrivate(), canonical.getBytes(UTF_8)),
              sink()));
      h.tell(new Host.UpdateListing(a.ownerId, randomListing(), sink()));
      loop.runUntilQuiet();
      loop.after(random.nextLong(HEARTBEAT_SECONDS * 1000L), a::heartbeatLoop);
    }
    wakeLoop();
    note(
        "set up: "
            + config.renters()
            + " renters, "
            + config.providers()
            + " providers, hosts "
            + agents.values().stream()
                .map(a -> a.hostId + "(" + a.gpu + "×" + a.cards + " " + a.region + ")")
                .toList());
  }

  private Listing randomListing() {
    long onDemand = micros(1.0, 4.0);
    Long spot = random.nextInt(10) < 7 ? micros(0.4, 2.0) : null;
    int notice = 120 + random.nextInt(181);
    List<Listing.Window> windows = List.of();
    if (random.nextInt(8) == 0) {
      // A window that closes in a few minutes: spot rentals get their notice, then the host leaves
      // the market.
      ZonedDateTime now = clock.instant().atZone(ZoneOffset.UTC);
      int minute = now.getHour() * 60 + now.getMinute();
      DayOfWeek day = now.getDayOfWeek();
      windows =
          List.of(
              new Listing.Window(
                  day, Math.max(0, minute - 60), Math.min(1440, minute + 2 + random.nextInt(7))));
    }
    return new Listing(onDemand, spot, notice, windows, random.nextInt(20) != 0);
  }

  /** A random amount in µ€ between {@code low} and {@code high} euros. */
  private long micros(double low, double high) {
    long lo = Math.round(low * 1_000_000), hi = Math.round(high * 1_000_000);
    return lo + random.nextLong(hi - lo + 1);
  }

  /**
   * Every minute, as the node's RentalWaker does: unfinished rentals are woken, so one that crashed
   * resumes.
   */
  private void wakeLoop() {
    loop.after(
        60_000,
        () -> {
          wakeUnfinished();
          wakeLoop();
        });
  }

  private void wakeUnfinished() {
    for (Slot<Rental.Command> r : rentals.values()) {
      Auditor.RentalBook b = auditor.rentals.get(r.id);
      if (b == null || !b.finished()) r.live().tell(Rental.Wake.INSTANCE);
    }
    // as a waker reading the snapshots' read side would
    for (Slot<Snapshot.Command> s : snapshots.values()) {
      Auditor.SnapshotBook b = auditor.snapshots.get(s.id);
      if (b == null || !b.finished()) s.live().tell(Snapshot.Wake.INSTANCE);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The agents: heartbeats, workloads, silences and machines lost, as an agent session would tell
  // Host and Rental.

  final class Agent {
    final String hostId;
    final String ownerId;
    final String region;
    final String gpu;
    final int cards;
    final KeyPair key = Ed25519.generate();
    ActorRef<Host.ToSession> session;
    int sessionNo;
    boolean attached;
    long attachingSince = -1;
    long seq;
    long silentUntil = -1;
    long downUntil = -1;
    final Map<String, Boolean> workloads = new TreeMap<>(); // rental → started
    // As the agent's Rentals: each running workload's listed_from, and stamps (heartbeats' and
    // listed_from) that only grow, whatever the clock does.
    final Map<String, Instant> listedFrom = new TreeMap<>();
    Instant lastStamp;

    Instant nextStamp() {
      Instant now = clock.instant();
      lastStamp = lastStamp != null && !now.isAfter(lastStamp) ? lastStamp.plusMillis(1) : now;
      return lastStamp;
    }

    // Workloads that stopped on their own, and when: a stop_rental for one is answered with its
    // end, as the agent does (Rentals: "rental_stopped (its end; now for an unknown one)").
    final Map<String, Instant> ended = new TreeMap<>();
    // Kept workspaces' archives: snapshot → its size (the same manifest on every retry).
    final Map<String, Long> archives = new TreeMap<>();

    Agent(String hostId, String ownerId, String region, String gpu, int cards) {
      this.hostId = hostId;
      this.ownerId = ownerId;
      this.region = region;
      this.gpu = gpu;
      this.cards = cards;
    }

    HardwareReport report() {
      List<HardwareReport.Gpu> gpus = new ArrayList<>();
      boolean h100 = gpu.equals("h100-80gb");
      for (int i = 0; i < cards; i++) {
        gpus.add(
            new HardwareReport.Gpu(
                i,
                "GPU-" + hostId + "-" + i,
                h100 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-80GB",
                "nvidia",
                h100 ? 81559L : 81920L,
                "550.54.15",
                "12.4",
                34,
                0L,
                5,
                16));
      }
      return new HardwareReport(
          "0.1.0",
          false,
          "2026-03-01T18:00:00Z",
          gpus,
          new HardwareReport.Cpu("AMD EPYC 9454 48-Core Processor", 96),
          1_031_000L,
          new HardwareReport.Disk("/var/lib/tickmark", 1_800_000_000_000L, 1450.2),
          null);
    }

    boolean reachable() {
      return loop.nowMillis() >= silentUntil && loop.nowMillis() >= downUntil;
    }

    /**
     * A new session: the agent (re)connects and attaches; {@code direct} at set-up, else through
     * the network.
     */
    void connect(boolean direct) {
      int no = ++sessionNo;
      attached = false;
      attachingSince = loop.nowMillis();
      session =
          system.systemActorOf(
              Behaviors.<Host.ToSession>receiveMessage(
                  m -> {
                    fromHost(no, m);
                    return Behaviors.same();
                  }),
              "session-" + hostId + "-" + no,
              Props.empty());
      ActorRef<StatusReply<Host.Attached>> reply =
          once(
              m -> {
                if (no == sessionNo && m instanceof StatusReply<?> r && r.isSuccess()) {
                  attached = true;
                  attachingSince = -1;
                }
              });
      Host.Attach attach = new Host.Attach(session, reply);
      if (direct) deliver(host(hostId), attach);
      else send(Link.AGENT_TO_HOST, "agent:" + hostId, host(hostId), attach);
    }

    void heartbeatLoop() {
      if (reachable()) {
        if (attached) {
          Instant at = nextStamp();
          Host.Heartbeat hb =
              new Host.Heartbeat(
                  session,
                  ++seq,
                  healthy(),
                  List.copyOf(running()),
                  at,
                  Host.micros(Instant.now()));
          send(Link.AGENT_TO_HOST, "agent:" + hostId, host(hostId), hb);
        } else if (attachingSince < 0 || loop.nowMillis() - attachingSince > 6_000) {
          connect(false);
        }
      }
      loop.after(HEARTBEAT_SECONDS * 1000L, this::heartbeatLoop);
    }

    List<Host.GpuHealth> healthy() {
      List<Host.GpuHealth> g = new ArrayList<>(cards);
      for (int i = 0; i < cards; i++) g.add(new Host.GpuHealth(i, 90, 60, null));
      return g;
    }

    List<String> running() {
      return workloads.entrySet().stream()
          .filter(Map.Entry::getValue)
          .map(Map.Entry::getKey)
          .toList();
    }

    void fromHost(int no, Host.ToSession m) {
      if (no != sessionNo || !reachable()) return; // an old session, or the agent cannot hear
      if (m instanceof Host.CloseSession) {
        attached = false;
        attachingSince = -1;
      } else if (m instanceof Host.RunWorkload w) {
        Boolean started = workloads.get(w.rentalId());
        if (Boolean.TRUE.equals(started)) {
          report(
              new Rental.WorkloadStarted(hostId, clock.instant(), listedFrom.get(w.rentalId())),
              w.rentalId());
        } else if (started == null) {
          workloads.put(w.rentalId(), false);
          loop.after(100 + random.nextLong(3000), () -> startWorkload(w.rentalId()));
        }
      } else if (m instanceof Host.StopWorkloadOnAgent w) {
        loop.after(
            random.nextLong(2000),
            () -> {
              if (!reachable()) return;
              Instant at =
                  workloads.remove(w.rentalId()) == null
                      ? ended.getOrDefault(w.rentalId(), clock.instant())
                      : clock.instant();
              report(new Rental.WorkloadStopped(hostId, at), w.rentalId());
            });
      } else if (m instanceof Host.UploadSnapshotOnAgent u) {
        upload(u.snapshotId());
      } else if (m instanceof Host.PreemptWorkload p) {
        // Notices come in the host's (per-JVM) map order: kept by rental id, one check per
        // deadline.
        if (preempts.containsValue(p.deadline())) {
          preempts.put(p.rentalId(), p.deadline());
          return;
        }
        preempts.put(p.rentalId(), p.deadline());
        long at = p.deadline().toEpochMilli() - EPOCH.toEpochMilli() - clock.jumpedMillis();
        loop.at(at, () -> preemptDue(p.deadline()));
      }
    }

    final Map<String, Instant> preempts = new TreeMap<>();

    private void preemptDue(Instant deadline) {
      for (String rentalId : new ArrayList<>(preempts.keySet())) {
        if (!preempts.get(rentalId).equals(deadline)) continue;
        preempts.remove(rentalId);
        if (!reachable() || workloads.remove(rentalId) == null) continue;
        report(new Rental.WorkloadStopped(hostId, deadline), rentalId);
      }
    }

    private void startWorkload(String rentalId) {
      if (!reachable() || !Boolean.FALSE.equals(workloads.get(rentalId))) return;
      if (random.nextInt(40) == 0) {
        workloads.remove(rentalId);
        report(new Rental.WorkloadFailed(hostId, "image pull failed"), rentalId);
        return;
      }
      workloads.put(rentalId, true);
      Instant now = clock.instant();
      Instant from = nextStamp();
      listedFrom.put(rentalId, from);
      report(new Rental.WorkloadStarted(hostId, now, from), rentalId);
    }

    /**
     * Every reminder sends the manifest again and then completes (both idempotent, as the real
     * agent's resume is); 1 in 20 archives is past the size limit, 1 in 25 uploads fails.
     */
    private void upload(String snapshotId) {
      long size =
          archives.computeIfAbsent(
              snapshotId,
              k ->
                  random.nextInt(20) == 0
                      ? 9 * GIB
                      : (1 + random.nextInt(8)) * GIB - random.nextInt(1000));
      Slot<Snapshot.Command> slot = snapshot(snapshotId);
      String from = "agent:" + hostId;
      if (random.nextInt(25) == 0) {
        loop.after(
            random.nextLong(2000),
            () ->
                send(
                    Link.AGENT_TO_SNAPSHOT,
                    from,
                    slot,
                    new Snapshot.Fail(hostId, "workspace_gone", sink())));
        return;
      }
      String sha = Host.sha256(snapshotId + ":" + size);
      int chunks = (int) ((size + 4 * 1024 * 1024 - 1) / (4 * 1024 * 1024));
      long manifestAt = random.nextLong(2000);
      loop.after(
          manifestAt,
          () ->
              send(
                  Link.AGENT_TO_SNAPSHOT,
                  from,
                  slot,
                  new Snapshot.RecordManifest(hostId, size, sha, chunks, 0, sink())));
      loop.after(
          manifestAt + 500 + random.nextLong(5000),
          () -> send(Link.AGENT_TO_SNAPSHOT, from, slot, new Snapshot.Complete(hostId, sink())));
    }

    void report(Rental.Command c, String rentalId) {
      toRental(Link.AGENT_TO_RENTAL, "agent:" + hostId, rentalId, c);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Steps

  /**
   * Runs {@code steps} steps (stopping at the first violation), then lets the market come to rest
   * and audits it.
   */
  public Result run(long steps) {
    long actNanos = 0, auditNanos = 0;
    while (step < steps && auditor.violations.isEmpty()) {
      step++;
      long t0 = System.nanoTime();
      act();
      loop.advance(pause());
      long t1 = System.nanoTime();
      audit();
      stepDigests.add(digestSoFar());
      actNanos += t1 - t0;
      auditNanos += System.nanoTime() - t1;
    }
    stats.put("ms acting", actNanos / 1_000_000);
    if (config.snapshots()) {
      stats.put(
          "snapshots ready", auditor.snapshots.values().stream().filter(b -> b.ready).count());
      stats.put(
          "snapshots suspended",
          auditor.snapshots.values().stream().filter(b -> b.suspended).count());
    }
    if (config.refunds())
      stats.put(
          "rentals refunded",
          auditor.rentals.values().stream().filter(b -> b.refunded > 0).count());
    stats.put("ms auditing", auditNanos / 1_000_000);
    stats.put("ms waiting for callbacks", loop.waitNanos / 1_000_000);
    stats.put("callback waits", loop.waits);
    stats.put("foreign ties", loop.foreignTies);
    stats.put("foreign unordered", loop.foreignUnordered);
    if (auditor.violations.isEmpty()) rest();
    stats.put("steps", step);
    stats.put("events", auditor.events);
    stats.put("checks", auditor.checks);
    stats.put("messages sent", network.sent);
    stats.put("messages dropped", network.dropped);
    stats.put("messages duplicated", network.duplicated);
    stats.put("loop tasks", loop.tasksRun);
    stats.put("foreign submissions", loop.foreignSubmissions.get());
    stats.put("rentals", (long) rentals.size());
    stats.put("virtual seconds", loop.nowMillis() / 1000);
    for (Auditor.RentalBook r : auditor.rentals.values())
      if (r.reason != null) stats.merge("ended " + r.reason, 1L, Long::sum);
    return new Result(
        config.seed(),
        step,
        HexFormat.of().formatHex(digest.digest()),
        List.copyOf(auditor.violations),
        String.join("\n", trace) + "\n",
        Map.copyOf(stats),
        List.copyOf(stepDigests));
  }

  private long pause() {
    int p = random.nextInt(100);
    if (p < 70) return random.nextLong(1000);
    if (p < 95) return 1000 + random.nextLong(4000);
    return 5000 + random.nextLong(25_000);
  }

  private void audit() {
    for (Slot<Account.Command> a : accounts.values())
      a.live().tell(new Account.GetSummary(summaryCollector));
    loop.runUntilQuiet();
    // An account that wrote after it answered (a pending hold's expiry timer ran while the loop
    // quieted) is asked again: its answer and the books must describe the same moment.
    for (int round = 0; round < 3; round++) {
      boolean asked = false;
      for (Map.Entry<String, Slot<Account.Command>> a : accounts.entrySet()) {
        if (accountWrites
            .getOrDefault(a.getKey(), 0L)
            .equals(writesAtSummary.getOrDefault(a.getKey(), 0L))) continue;
        a.getValue().live().tell(new Account.GetSummary(summaryCollector));
        asked = true;
      }
      if (!asked) break;
      loop.runUntilQuiet();
    }
    Duration slack = CLOSE_SLACK.plus(Duration.ofMillis(clock.jumpedForwardMillis()));
    auditor.afterStep(summaries, clock.instant(), RENTAL.stopTimeout(), slack);
    // (closes-in-time allows for every wall clock jump so far: a coarse net for rentals that never
    // close)
  }

  private void act() {
    int roll = random.nextInt(100);
    if (roll < 10) deposit();
    else if (roll < 22) launch();
    else if (roll < 29) stop();
    else if (roll < 30) spendCap();
    else if (roll < 32) reprice();
    else if (roll < 33) reclaim();
    else if (roll < 34 && config.payouts()) payout();
    else if (roll < 37 && config.agentFaults()) silence();
    else if (roll < 38 && config.agentFaults()) workloadCrash();
    else if (roll < 39 && config.agentFaults() && random.nextInt(3) == 0) machineLost();
    else if (roll < 41 && config.crashes()) crash();
    else if (roll < 42 && config.nodeLoss() && random.nextInt(5) == 0) nodeLoss();
    else if (roll < 43 && config.clockJumps() && random.nextInt(2) == 0) clockJump();
    else if (roll < 44 && config.partitions() && random.nextInt(2) == 0) partition();
    else if (roll < 46 && config.snapshots() && random.nextInt(4) == 0) deleteSnapshot();
    else if (roll < 48 && config.refunds()) refund();
    else note("tick");
  }

  private <T> T pick(List<T> list) {
    return list.get(random.nextInt(list.size()));
  }

  private void deposit() {
    String renter = pick(renterIds);
    long amount;
    String reference;
    if (!depositsMade.isEmpty() && random.nextInt(12) == 0) {
      reference = pick(new ArrayList<>(depositsMade.keySet())); // a webhook delivered twice
      amount = depositsMade.get(reference);
      renter = reference.substring(reference.indexOf('/') + 1);
    } else {
      amount = random.nextInt(4) == 0 ? micros(0.05, 1) : micros(1, 25);
      reference = "dep-" + step + "/" + renter;
      depositsMade.put(reference, amount);
    }
    note("deposit " + renter + " " + amount + " µ€ " + reference);
    account(renter).live().tell(new Account.Deposit(reference, amount, sink()));
  }

  private void launch() {
    String id = "r" + (rentals.size() + 1);
    String renter = pick(renterIds);
    String gpu = pick(GPUS);
    int count = random.nextInt(10) < 6 ? 1 : 1 + random.nextInt(4);
    Listing.Tier tier = random.nextInt(10) < 3 ? Listing.Tier.SPOT : Listing.Tier.ON_DEMAND;
    String region = random.nextBoolean() ? null : pick(REGIONS);
    long ceiling = micros(0.3, 5);
    Long maxTotal = random.nextInt(5) == 0 ? micros(0.01, 3) : null;
    int wait = random.nextInt(5) == 0 ? 0 : random.nextInt(61);
    Rental.Spec spec =
        new Rental.Spec(
            gpu,
            count,
            tier,
            region,
            ceiling,
            "ghcr.io/acme/train:1",
            List.of("python", "train.py"),
            null,
            maxTotal,
            wait,
            false);
    note(
        "launch "
            + id
            + " "
            + renter
            + " "
            + gpu
            + "×"
            + count
            + " "
            + tier.wire()
            + " "
            + (region == null ? "any" : region)
            + " ceiling "
            + ceiling
            + " max_total "
            + maxTotal
            + " wait "
            + wait
            + " s");
    launchedBy.put(id, renter);
    rental(id).live().tell(new Rental.Create(renter, spec, sink()));
  }

  private void stop() {
    List<String> open = new ArrayList<>();
    for (String id : rentals.keySet()) {
      Auditor.RentalBook b = auditor.rentals.get(id);
      if (b != null && b.renterId != null && b.endedAt == null && !b.refused) open.add(id);
    }
    if (open.isEmpty()) {
      note("stop: nothing runs");
      return;
    }
    String id = pick(open);
    String renter = auditor.rentals.get(id).renterId;
    boolean keep = config.snapshots() && random.nextInt(4) == 0;
    note("stop " + id + (keep ? " keeping its workspace" : ""));
    rental(id).live().tell(new Rental.Stop(renter, keep, sink()));
    if (random.nextInt(10) == 0)
      rental(id).live().tell(new Rental.Stop(renter, sink())); // a double click
  }

  /** The renter deletes one of its snapshots (as the HTTP edge asks, directly). */
  private void deleteSnapshot() {
    List<String> kept = new ArrayList<>();
    for (Auditor.SnapshotBook b : auditor.snapshots.values())
      if (b.renterId != null && !b.deleted) kept.add(b.id);
    if (kept.isEmpty()) {
      note("delete snapshot: none kept");
      return;
    }
    String id = pick(kept);
    note("delete snapshot " + id);
    snapshot(id).live().tell(new Snapshot.Delete(auditor.snapshots.get(id).renterId, sink()));
  }

  private void deleteEverySnapshot() {
    for (Auditor.SnapshotBook b : auditor.snapshots.values())
      if (b.renterId != null && !b.deleted)
        snapshot(b.id).live().tell(new Snapshot.Delete(b.renterId, sink()));
  }

  private void spendCap() {
    String renter = pick(renterIds);
    Long cap = random.nextBoolean() ? null : micros(0.5, 40);
    note("spend cap " + renter + " " + cap);
    account(renter).live().tell(new Account.SetSpendCap(cap, sink()));
  }

  private void reprice() {
    Agent a = pick(new ArrayList<>(agents.values()));
    Listing l = randomListing();
    note("listing " + a.hostId + " " + l);
    host(a.hostId).live().tell(new Host.UpdateListing(a.ownerId, l, sink()));
  }

  private void reclaim() {
    Agent a = pick(new ArrayList<>(agents.values()));
    List<Integer> cards = List.of(random.nextInt(a.cards));
    note("reclaim " + a.hostId + " cards " + cards);
    host(a.hostId).live().tell(new Host.Reclaim(a.ownerId, cards, sink()));
  }

  private void payout() {
    String provider = pick(providerIds);
    Auditor.AccountBook b = auditor.book(provider);
    long earnings = b.credited - b.paidOut;
    if (!payoutsMade.isEmpty() && random.nextInt(5) == 0) {
      String id = pick(new ArrayList<>(payoutsMade.keySet())); // a payout run retried
      note("payout again " + id);
      account(id.substring(id.indexOf('/') + 1))
          .live()
          .tell(new Account.Payout(id, payoutsMade.get(id), sink()));
      return;
    }
    if (earnings <= 0) {
      note("payout " + provider + ": nothing earned");
      return;
    }
    long amount = 1 + random.nextLong(earnings);
    String id = "po-" + step + "/" + provider;
    payoutsMade.put(id, amount);
    note("payout " + id + " " + amount + " µ€ of " + earnings);
    account(provider).live().tell(new Account.Payout(id, amount, sink()));
  }

  /** The refunds asked for, by reference: the rental and the amount (null: the rest). */
  private final Map<String, Map.Entry<String, Long>> refundsMade = new TreeMap<>();

  /**
   * An operator refunds part or all of what a closed rental charged; now and then a refund asked
   * for again (a retried request), or more than is left (refused).
   */
  private void refund() {
    if (!refundsMade.isEmpty() && random.nextInt(4) == 0) {
      String reference = pick(new ArrayList<>(refundsMade.keySet()));
      Map.Entry<String, Long> asked = refundsMade.get(reference);
      note("refund again " + reference + " of " + asked.getKey());
      rental(asked.getKey())
          .live()
          .tell(new Rental.Refund(reference, asked.getValue(), "again", sink()));
      return;
    }
    List<Auditor.RentalBook> charged =
        auditor.rentals.values().stream()
            .filter(b -> b.closedAt != null && b.last() != null && b.last().cost() > 0)
            .toList();
    if (charged.isEmpty()) {
      note("refund: no closed rental charged anything");
      return;
    }
    Auditor.RentalBook b = pick(charged);
    long left = b.last().cost() - b.refunded;
    // a third of them the rest; the others a part, a few more than is left
    Long amount = random.nextInt(3) == 0 ? null : 1 + random.nextLong(Math.max(1, left + left / 8));
    String reference = "rf-" + step;
    refundsMade.put(reference, new java.util.AbstractMap.SimpleEntry<>(b.id, amount));
    note("refund " + reference + " of " + b.id + " " + amount + " µ€ (" + left + " left)");
    stats.merge("refunds asked", 1L, Long::sum);
    rental(b.id).live().tell(new Rental.Refund(reference, amount, "sim", sink()));
  }

  private void silence() {
    Agent a = pick(new ArrayList<>(agents.values()));
    long millis =
        random.nextInt(3) == 0 ? 31_000 + random.nextLong(60_000) : 1_000 + random.nextLong(25_000);
    a.silentUntil = Math.max(a.silentUntil, loop.nowMillis() + millis);
    note("agent " + a.hostId + " silent for " + millis + " ms");
  }

  private void workloadCrash() {
    List<Agent> busy =
        agents.values().stream().filter(a -> a.reachable() && !a.running().isEmpty()).toList();
    if (busy.isEmpty()) {
      note("workload crash: none runs");
      return;
    }
    Agent a = pick(busy);
    String rentalId = pick(a.running());
    a.workloads.remove(rentalId);
    a.ended.put(rentalId, clock.instant());
    note("workload " + rentalId + " crashed on " + a.hostId);
    a.report(new Rental.WorkloadStopped(a.hostId, clock.instant()), rentalId);
  }

  private void machineLost() {
    Agent a = pick(new ArrayList<>(agents.values()));
    long millis = 35_000 + random.nextLong(200_000);
    a.downUntil = loop.nowMillis() + millis;
    a.workloads.clear();
    a.attached = false;
    a.attachingSince = -1;
    note("machine " + a.hostId + " lost for " + millis + " ms (its workloads with it)");
  }

  private void crash() {
    List<Slot<?>> alive = new ArrayList<>();
    accounts.values().stream().filter(Slot::alive).forEach(alive::add);
    hosts.values().stream().filter(Slot::alive).forEach(alive::add);
    matchers.values().stream().filter(Slot::alive).forEach(alive::add);
    rentals.values().stream().filter(Slot::alive).forEach(alive::add);
    snapshots.values().stream().filter(Slot::alive).forEach(alive::add);
    if (alive.isEmpty()) return;
    Slot<?> s = pick(alive);
    note("crash " + s.endpoint());
    s.crash();
  }

  private void nodeLoss() {
    note("node lost: every entity stops; unfinished rentals are woken in 3 s and 9 s");
    accounts.values().forEach(Slot::crash);
    hosts.values().forEach(Slot::crash);
    matchers.values().forEach(Slot::crash);
    rentals.values().forEach(Slot::crash);
    snapshots.values().forEach(Slot::crash);
    loop.after(3_000, this::wakeUnfinished);
    loop.after(9_000, this::wakeUnfinished);
  }

  private void clockJump() {
    int kind = config.clockStepsBack() ? random.nextInt(10) : 9;
    if (kind < 3) {
      Duration by = Duration.ofMillis(1_000 + random.nextLong(119_000));
      clock.jump(by.negated());
      count("clock steps back");
      note("wall clock steps back " + by.toMillis() + " ms");
      return;
    }
    if (kind == 3 || kind == 4) {
      clock.jump(kind == 3 ? Duration.ofHours(-1) : Duration.ofHours(1));
      if (kind == 3) count("clock steps back");
      note("wall clock steps " + (kind == 3 ? "back" : "forward") + " an hour");
      return;
    }
    Duration by = Duration.ofMillis(1_000 + random.nextLong(119_000));
    clock.jump(by);
    note("wall clock jumps forward " + by.toMillis() + " ms");
  }

  private void partition() {
    List<String> endpoints = new ArrayList<>();
    accounts.values().forEach(s -> endpoints.add(s.endpoint()));
    hosts.values().forEach(s -> endpoints.add(s.endpoint()));
    String endpoint = pick(endpoints);
    long millis = 10_000 + random.nextLong(50_000);
    network.partition(endpoint, loop.nowMillis() + millis);
    note("partition " + endpoint + " for " + millis + " ms");
  }

  /** Who launched each rental, known before the rental records anything. */
  private final Map<String, String> launchedBy = new TreeMap<>();

  /**
   * Faults off, every rental stopped, the market left alone for 20 minutes; then nothing may remain
   * open.
   */
  private void rest() {
    resting = true;
    note("rest: faults off, every rental stopped");
    network.faults(SimNetwork.Faults.NONE);
    for (Agent a : agents.values()) {
      a.silentUntil = -1;
      a.downUntil = -1;
    }
    for (Slot<Rental.Command> r : rentals.values()) {
      Auditor.RentalBook b = auditor.rentals.get(r.id);
      if (b != null && b.renterId != null && !b.finished())
        r.live().tell(new Rental.Stop(b.renterId, sink()));
      // A launch that has recorded nothing yet (issue 15): its stop waits until it has.
      else if (b == null && launchedBy.containsKey(r.id))
        r.live().tell(new Rental.Stop(launchedBy.get(r.id), sink()));
    }
    // Every snapshot deleted; again halfway, for those the stops just made.
    deleteEverySnapshot();
    for (int i = 0; i < 120 && auditor.violations.isEmpty(); i++) {
      if (i == 60) deleteEverySnapshot();
      loop.advance(10_000);
      audit();
    }
    if (auditor.violations.isEmpty()) {
      for (Slot<Account.Command> a : accounts.values())
        a.live().tell(new Account.GetSummary(summaryCollector));
      loop.runUntilQuiet();
      auditor.atRest(summaries);
    }
  }

  @Override
  public void close() {
    system.terminate();
    for (int i = 0; i < 600 && !system.whenTerminated().isCompleted(); i++) loop.advance(100);
    loop.close();
  }

  /** Runs one seed: the same seed and config give the same trace hash and the same result. */
  public static Result run(Config config, long steps) {
    try (MarketSimulation sim = new MarketSimulation(config)) {
      return sim.run(steps);
    }
  }

  public static void main(String[] args) {
    if (args.length > 0
        && args[0].contains(",")) { // several seeds, one after the other in this JVM
      boolean ok = true;
      for (String s : args[0].split(",")) {
        String[] one = args.clone();
        one[0] = s;
        Result r = run(config(one), Long.parseLong(args[1]));
        System.out.print(r.report());
        ok &= r.ok();
      }
      System.exit(ok ? 0 : 1);
    }
    Result r = run(config(args), args.length > 1 ? Long.parseLong(args[1]) : 10_000);
    System.out.print(r.report());
    System.out.println(r.stats());
    System.exit(r.ok() ? 0 : 1);
  }

  private static Config config(String[] args) {
    long seed = args.length > 0 ? Long.parseLong(args[0]) : 1;
    String mode = args.length > 2 ? args[2] : "";
    if (mode.startsWith("--off=")) { // every fault, these invariants not enforced:
      // --off=settled-within-heartbeats,…
      Config c = Config.of(seed);
      return new Config(
          seed,
          c.renters(),
          c.providers(),
          c.hosts(),
          c.network(),
          c.crashes(),
          c.nodeLoss(),
          c.agentFaults(),
          c.clockJumps(),
          c.partitions(),
          c.payouts(),
          Set.of(mode.substring(6).split(",")),
          c.traceLines());
    }
    Config c =
        mode.startsWith("--without-known-bugs")
            ? Config.of(seed).withoutKnownBugs()
            : mode.startsWith("--calm") ? Config.calm(seed) : Config.of(seed);
    if (mode.contains("+steps-back")) c = c.withClockStepsBack();
    if (mode.contains("+refunds")) c = c.withRefunds();
    return mode.endsWith("+snapshots") ? c.withSnapshots() : c;
  }
}
