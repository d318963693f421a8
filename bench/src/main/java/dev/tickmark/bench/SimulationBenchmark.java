package dev.tickmark.bench;

import dev.tickmark.engine.sim.MarketSimulation;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Runs the deterministic market simulation (docs/simulation.md) over many seeds and prints, per
 * seed and in total, the steps (a deposit, a launch, a stop, a fault, … each followed by virtual
 * time passing and an audit), the operations they caused (tasks the event loop ran: an entity's
 * mailbox run, a timer, a network delivery, an agent's action), the journal events, the invariant
 * checks the auditor made, the wall time and the rates. Each seed runs on one thread; {@code
 * --threads} seeds run at once.
 *
 * <pre>
 * --steps=40000        steps in all, split evenly over the seeds (about 45 operations each)
 * --seeds=20           seeds 1..N (or --first-seed=S)
 * --threads=2
 * --faults=all|without-known-bugs|calm
 * </pre>
 *
 * Exit status 1 when a seed found a violation (its report is printed).
 */
public final class SimulationBenchmark {
  public static void main(String[] args) throws Exception {
    Map<String, String> a = new TreeMap<>();
    for (String arg : args) {
      String[] kv = arg.replaceFirst("^--", "").split("=", 2);
      a.put(kv[0], kv.length > 1 ? kv[1] : "true");
    }
    long ops = Long.parseLong(a.getOrDefault("steps", "40000"));
    int seeds = Integer.parseInt(a.getOrDefault("seeds", "20"));
    long first = Long.parseLong(a.getOrDefault("first-seed", "1"));
    int threads = Integer.parseInt(a.getOrDefault("threads", "2"));
    String faults = a.getOrDefault("faults", "without-known-bugs");
    long perSeed = (ops + seeds - 1) / seeds;
    System.out.printf(
        Locale.ROOT,
        "simulation: %,d steps over %d seeds (%d..%d, %,d each), %d threads, faults %s%n",
        perSeed * seeds,
        seeds,
        first,
        first + seeds - 1,
        perSeed,
        threads,
        faults);

    ExecutorService pool = Executors.newFixedThreadPool(threads);
    long started = System.nanoTime();
    List<Future<String[]>> runs = new ArrayList<>();
    for (long seed = first; seed < first + seeds; seed++) {
      MarketSimulation.Config base = MarketSimulation.Config.of(seed);
      MarketSimulation.Config config =
          switch (faults) {
            case "all" -> base;
            case "calm" -> MarketSimulation.Config.calm(seed);
            default -> base.withoutKnownBugs();
          };
      runs.add(
          pool.submit(
              () -> {
                long t0 = System.nanoTime();
                MarketSimulation.Result r = MarketSimulation.run(config, perSeed);
                double seconds = (System.nanoTime() - t0) / 1e9;
                Map<String, Long> s = r.stats();
                String line =
                    String.format(
                        Locale.ROOT,
                        "seed %4d  %-5s steps %,7d  %5.0f steps/s  operations %,10d  events %,9d  checks %,12d  "
                            + "virtual %6.1f h  rentals %,6d  crashes %,6d  %6.1f s  trace %s",
                        r.seed(),
                        r.ok() ? "ok" : "FAIL",
                        r.steps(),
                        r.steps() / seconds,
                        s.getOrDefault("loop tasks", 0L),
                        s.getOrDefault("events", 0L),
                        s.getOrDefault("checks", 0L),
                        s.getOrDefault("virtual seconds", 0L) / 3600.0,
                        s.getOrDefault("rentals", 0L),
                        s.getOrDefault("crashes", 0L),
                        seconds,
                        r.traceHash().substring(0, 16));
                synchronized (System.out) {
                  System.out.println(line);
                }
                return new String[] {
                  r.ok() ? "" : r.report(),
                  Long.toString(r.steps()),
                  Long.toString(s.getOrDefault("loop tasks", 0L)),
                  Long.toString(s.getOrDefault("checks", 0L)),
                  Long.toString(s.getOrDefault("events", 0L))
                };
              }));
    }
    long steps = 0, messages = 0, checks = 0, events = 0;
    int okSeeds = 0;
    StringBuilder failures = new StringBuilder();
    long seed = first;
    for (Future<String[]> f : runs) {
      String[] r;
      try {
        r = f.get();
      } catch (java.util.concurrent.ExecutionException e) {
        // A seed that could not run (e.g. its actor system's logger did not start in time on a
        // saturated machine) is reported and counted as not ok; the other seeds still finish.
        String why = "seed " + seed + ": did not run: " + e.getCause();
        System.out.println(why);
        r = new String[] {why + System.lineSeparator(), "0", "0", "0", "0"};
      }
      seed++;
      failures.append(r[0]);
      if (r[0].isEmpty()) okSeeds++;
      steps += Long.parseLong(r[1]);
      messages += Long.parseLong(r[2]);
      checks += Long.parseLong(r[3]);
      events += Long.parseLong(r[4]);
    }
    pool.shutdown();
    double seconds = (System.nanoTime() - started) / 1e9;
    System.out.printf(
        Locale.ROOT,
        "total: %,d steps in %.1f s = %,.0f steps/s (%,.0f per thread); %,d operations (%,.0f/s); %,d journal events; "
            + "%,d invariant checks (%,.0f/s); %s%n",
        steps,
        seconds,
        steps / seconds,
        steps / seconds / threads,
        messages,
        messages / seconds,
        events,
        checks,
        checks / seconds,
        failures.length() == 0 ? "every seed ok" : "FAILURES below");
    System.out.print(failures);
    String note =
        String.format(
            Locale.ROOT,
            "%,d steps, %d threads, faults %s; %,.0f steps/s, %,.0f invariant checks/s",
            steps,
            threads,
            faults,
            steps / seconds,
            checks / seconds);
    BenchResult.against(
            "simulation",
            "simulation.seeds-ok",
            "seeds the auditor found ok ÷ seeds run",
            okSeeds,
            "seeds",
            seeds,
            "seeds run")
        .withNote(note)
        .print();
    System.exit(failures.length() == 0 ? 0 : 1);
  }
}
