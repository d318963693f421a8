package dev.tickmark.http;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * Token buckets by key: each request takes a token, a bucket holds at most {@link Rate#burst()} and
 * refills at {@link Rate#perSecond()}. Pure (the clock is passed in) and thread-safe.
 *
 * <p>Memory is bounded: past {@code maxEntries} keys, buckets that have refilled (idle keys) are
 * dropped, at most once a second; if that is not enough, new keys share one overflow bucket until
 * room frees up, so a flood of made-up keys is limited as one client and never grows the map.
 */
public final class RateLimiter {
  /** {@code per-second} tokens refilled, up to {@code burst}. */
  public record Rate(double perSecond, int burst) {
    public Rate {
      if (!(perSecond > 0) || burst < 1)
        throw new IllegalArgumentException(
            "a rate limit needs per-second > 0 and burst >= 1, got " + perSecond + "/" + burst);
    }
  }

  private static final long SWEEP_EVERY_NANOS = 1_000_000_000L;

  private final Rate rate;
  private final int maxEntries;
  private final LongSupplier nanoTime;
  private final ConcurrentHashMap<Object, Bucket> buckets = new ConcurrentHashMap<>();
  private final Bucket overflow;
  private final AtomicLong lastSweep;

  public RateLimiter(Rate rate, int maxEntries, LongSupplier nanoTime) {
    if (maxEntries < 1) throw new IllegalArgumentException("max-entries must be >= 1");
    this.rate = rate;
    this.maxEntries = maxEntries;
    this.nanoTime = nanoTime;
    long now = nanoTime.getAsLong();
    this.overflow = new Bucket(rate.burst(), now);
    this.lastSweep = new AtomicLong(now - SWEEP_EVERY_NANOS);
  }

  /**
   * Takes a token from {@code key}'s bucket: 0 when there was one, else the whole seconds (at least
   * 1) until there is one again.
   */
  public long tryAcquire(Object key) {
    long now = nanoTime.getAsLong();
    return bucketFor(key, now).take(now);
  }

  /** Keys tracked now (tests). */
  int tracked() {
    return buckets.size();
  }

  private Bucket bucketFor(Object key, long now) {
    Bucket b = buckets.get(key);
    if (b != null) return b;
    if (buckets.size() >= maxEntries) {
      long last = lastSweep.get();
      if (now - last >= SWEEP_EVERY_NANOS && lastSweep.compareAndSet(last, now))
        buckets.values().removeIf(bucket -> bucket.full(now));
      if (buckets.size() >= maxEntries) return overflow;
    }
    return buckets.computeIfAbsent(key, k -> new Bucket(rate.burst(), now));
  }

  private final class Bucket {
    private double tokens;
    private long refilledAt;

    Bucket(double tokens, long now) {
      this.tokens = tokens;
      this.refilledAt = now;
    }

    synchronized long take(long now) {
      refill(now);
      if (tokens >= 1) {
        tokens -= 1;
        return 0;
      }
      return Math.max(1, (long) Math.ceil((1 - tokens) / rate.perSecond()));
    }

    synchronized boolean full(long now) {
      refill(now);
      return tokens >= rate.burst();
    }

    private void refill(long now) {
      double elapsed = (now - refilledAt) / 1e9;
      if (elapsed > 0) {
        tokens = Math.min(rate.burst(), tokens + elapsed * rate.perSecond());
        refilledAt = now;
      }
    }
  }
}
