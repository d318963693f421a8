package dev.tickmark.node;

import java.util.concurrent.ForkJoinPool;

/**
 * Keeps the JDK's common pool at two threads or more on small machines.
 *
 * <p>With fewer than three cores the common pool has parallelism 1, and {@link
 * java.util.concurrent.CompletableFuture} then runs every async callback on <em>a new thread</em>.
 * Pekko's Java API completes {@code context.ask} and {@code pipeToSelf} through such callbacks, so
 * a two-core node metering thousands of rentals started about a thousand threads a second (measured
 * with JFR; see docs/benchmarks-market.md §3c). The property only works before the pool exists,
 * hence {@link #ensureParallelism()} first thing in each {@code main}; {@link #parallelism()} lets
 * {@link Node} warn when an embedding program started it too late.
 */
public final class CommonPool {
  static final String PROPERTY = "java.util.concurrent.ForkJoinPool.common.parallelism";
  static final int MINIMUM = 2;

  private CommonPool() {}

  /** Sets the common pool's parallelism to at least {@value #MINIMUM} unless the user set it. */
  public static void ensureParallelism() {
    if (System.getProperty(PROPERTY) == null) {
      int wanted = Math.max(MINIMUM, Runtime.getRuntime().availableProcessors() - 1);
      System.setProperty(PROPERTY, Integer.toString(wanted));
    }
  }

  /** The common pool's parallelism as the JDK settled it. */
  public static int parallelism() {
    return ForkJoinPool.getCommonPoolParallelism();
  }

  /** True when async callbacks would each get a thread of their own. */
  public static boolean startsAThreadPerCallback() {
    return parallelism() < MINIMUM;
  }
}
