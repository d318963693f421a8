package dev.tickmark.http;

import com.typesafe.config.Config;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Caps on the long-lived streams renters hold on this node (SSE: a rental's events, its logs
 * followed; websockets: SSH connections): per account, per rental, and for all renters together, so
 * that one renter cannot fill the node's connections and crowd out the agents' websockets (whose
 * rentals would end {@code host_lost}). Counted per node: in a cluster each node keeps its own
 * counts, which bounds every node's share.
 *
 * <p>Thread-safe; a {@link Permit} is released once, when its stream ends however it ends.
 */
public final class StreamLimits {
  /**
   * @param perAccount streams one account may hold on this node
   * @param perRental streams on one rental (of any kind)
   * @param renters streams all renters together may hold on this node: the rest of the node's
   *     connections stay for agents and short requests
   */
  public record Settings(int perAccount, int perRental, int renters) {
    /** {@code tickmark.http.streams.*}. */
    public static Settings fromConfig(Config config) {
      Config c = config.getConfig("tickmark.http.streams");
      return new Settings(c.getInt("per-account"), c.getInt("per-rental"), c.getInt("renters"));
    }
  }

  /** A held stream; {@link #release()} gives its place back (more calls do nothing). */
  public static final class Permit {
    private final Runnable release;
    private final AtomicBoolean released = new AtomicBoolean();

    private Permit(Runnable release) {
      this.release = release;
    }

    public void release() {
      if (released.compareAndSet(false, true)) release.run();
    }
  }

  private final Settings settings;
  private final ConcurrentHashMap<String, Integer> byAccount = new ConcurrentHashMap<>();
  private final ConcurrentHashMap<String, Integer> byRental = new ConcurrentHashMap<>();
  private final AtomicInteger all = new AtomicInteger();

  public StreamLimits(Settings settings) {
    this.settings = settings;
  }

  /**
   * A place for one more stream of {@code account} on {@code rental}, or a 429 {@code
   * too_many_streams} problem saying which cap was reached.
   */
  public Permit acquire(String account, String rental) {
    if (!take(all, settings.renters()))
      throw tooMany("this node serves as many renter streams as it can; retry shortly");
    if (!take(byAccount, account, settings.perAccount())) {
      all.decrementAndGet();
      throw tooMany(
          "an account holds at most "
              + settings.perAccount()
              + " event, log and SSH streams at once on a node; close one");
    }
    if (!take(byRental, rental, settings.perRental())) {
      give(byAccount, account);
      all.decrementAndGet();
      throw tooMany(
          "a rental has at most " + settings.perRental() + " streams open at once; close one");
    }
    return new Permit(
        () -> {
          give(byRental, rental);
          give(byAccount, account);
          all.decrementAndGet();
        });
  }

  /** Streams held now (for tests and metrics). */
  public int held() {
    return all.get();
  }

  private static boolean take(AtomicInteger counter, int cap) {
    while (true) {
      int n = counter.get();
      if (n >= cap) return false;
      if (counter.compareAndSet(n, n + 1)) return true;
    }
  }

  /** One more for {@code key} unless it has {@code cap}; atomic per key. */
  private static boolean take(ConcurrentHashMap<String, Integer> map, String key, int cap) {
    boolean[] taken = {false};
    map.compute(
        key,
        (k, n) -> {
          int held = n == null ? 0 : n;
          if (held >= cap) return n;
          taken[0] = true;
          return held + 1;
        });
    return taken[0];
  }

  /** One back; a key whose count reaches 0 leaves the map. */
  private static void give(ConcurrentHashMap<String, Integer> map, String key) {
    map.computeIfPresent(key, (k, n) -> n <= 1 ? null : n - 1);
  }

  private static Problem tooMany(String detail) {
    return new Problem(429, "too_many_streams", detail);
  }
}
