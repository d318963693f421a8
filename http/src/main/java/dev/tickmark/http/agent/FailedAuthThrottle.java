package dev.tickmark.http.agent;

import com.typesafe.config.Config;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Arrays;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * A token bucket per client address for agent authentications that fail: every attempt takes a
 * token, one that authenticates gives it back, so only failures drain the bucket. An address with
 * an empty bucket is answered 429 before anything else is looked at (no entity, no hash).
 *
 * <p>IPv6 clients are counted per /64 (one host's addresses), IPv4 per address. Memory is bounded:
 * past {@link Settings#maxAddresses} tracked addresses, buckets that have refilled (idle addresses)
 * are dropped, at most once a second; if that is not enough, new addresses share one bucket until
 * room frees up, so a spread-out flood is throttled as one client.
 */
public final class FailedAuthThrottle {

  /**
   * {@code tickmark.agent-socket.failed-auth}: {@code per-second} tokens refilled, up to {@code
   * burst}; {@code max-addresses} tracked at once.
   */
  public record Settings(double perSecond, int burst, int maxAddresses) {
    public Settings {
      if (!(perSecond > 0) || burst < 1 || maxAddresses < 1)
        throw new IllegalArgumentException(
            "tickmark.agent-socket.failed-auth needs per-second > 0, burst >= 1, max-addresses >="
                + " 1");
    }

    public static Settings fromConfig(Config config) {
      Config c = config.getConfig("tickmark.agent-socket.failed-auth");
      return new Settings(c.getDouble("per-second"), c.getInt("burst"), c.getInt("max-addresses"));
    }
  }

  private final Settings settings;
  private final LongSupplier nanoTime;
  private final ConcurrentHashMap<InetAddress, Bucket> buckets = new ConcurrentHashMap<>();
  private final Bucket overflow;
  private final AtomicLong lastSweep;

  public FailedAuthThrottle(Settings settings) {
    this(settings, System::nanoTime);
  }

  FailedAuthThrottle(Settings settings, LongSupplier nanoTime) {
    this.settings = settings;
    this.nanoTime = nanoTime;
    long now = nanoTime.getAsLong();
    this.overflow = new Bucket(settings, settings.burst(), now);
    this.lastSweep = new AtomicLong(now - 1_000_000_000L);
  }

  /**
   * Takes one attempt from the address's bucket. {@link Attempt#retryAfterSeconds()} is 0 when it
   * was taken, else the whole seconds (at least 1) until one is there again.
   */
  public Attempt tryAcquire(InetAddress address) {
    long now = nanoTime.getAsLong();
    Bucket bucket = bucketFor(key(address), now);
    return new Attempt(bucket, bucket.take(now));
  }

  /** One attempt's verdict; an attempt that did not fail gives its token back. */
  public static final class Attempt {
    private final Bucket bucket;
    private final long retryAfterSeconds;

    private Attempt(Bucket bucket, long retryAfterSeconds) {
      this.bucket = bucket;
      this.retryAfterSeconds = retryAfterSeconds;
    }

    public boolean allowed() {
      return retryAfterSeconds == 0;
    }

    public long retryAfterSeconds() {
      return retryAfterSeconds;
    }

    /** The attempt authenticated (or the engine could not say): it does not count as a failure. */
    public void refund() {
      if (allowed()) bucket.giveBack();
    }
  }

  /** Addresses tracked now (tests). */
  int tracked() {
    return buckets.size();
  }

  private Bucket bucketFor(InetAddress key, long now) {
    Bucket b = buckets.get(key);
    if (b != null) return b;
    if (buckets.size() >= settings.maxAddresses()) {
      long last = lastSweep.get();
      if (now - last >= 1_000_000_000L && lastSweep.compareAndSet(last, now))
        buckets.values().removeIf(bucket -> bucket.full(now));
      if (buckets.size() >= settings.maxAddresses()) return overflow;
    }
    return buckets.computeIfAbsent(key, k -> new Bucket(settings, settings.burst(), now));
  }

  static InetAddress key(InetAddress address) {
    if (!(address instanceof Inet6Address)) return address;
    byte[] prefix = Arrays.copyOf(address.getAddress(), 16);
    Arrays.fill(prefix, 8, 16, (byte) 0);
    try {
      return InetAddress.getByAddress(prefix);
    } catch (UnknownHostException e) {
      return address; // 16 bytes are always an address
    }
  }

  private static final class Bucket {
    private final Settings settings;
    private double tokens;
    private long refilledAt;

    Bucket(Settings settings, double tokens, long now) {
      this.settings = settings;
      this.tokens = tokens;
      this.refilledAt = now;
    }

    synchronized long take(long now) {
      refill(now);
      if (tokens >= 1) {
        tokens -= 1;
        return 0;
      }
      return Math.max(1, (long) Math.ceil((1 - tokens) / settings.perSecond()));
    }

    synchronized void giveBack() {
      tokens = Math.min(settings.burst(), tokens + 1);
    }

    synchronized boolean full(long now) {
      refill(now);
      return tokens >= settings.burst();
    }

    private void refill(long now) {
      double elapsed = (now - refilledAt) / 1e9;
      if (elapsed > 0) {
        tokens = Math.min(settings.burst(), tokens + elapsed * settings.perSecond());
        refilledAt = now;
      }
    }
  }
}
