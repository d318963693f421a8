package dev.tickmark.engine.sim;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;

/**
 * The entities' wall clock: the loop's virtual monotonic time from a fixed epoch, plus the jumps
 * the simulation makes (a node's wall clock stepped by NTP). Pekko's timers run on the monotonic
 * time only, as they do on a real node.
 */
public final class SimClock extends Clock {
  private final SimLoop loop;
  private final Instant epoch;
  private long jumpMillis;
  private long forwardMillis; // the forward jumps alone
  // The cumulative jump from each virtual instant a jump was made on (for backward steps).
  private final java.util.TreeMap<Long, Long> jumpsFrom = new java.util.TreeMap<>();

  SimClock(SimLoop loop, Instant epoch) {
    this.loop = loop;
    this.epoch = epoch;
  }

  /** Steps the wall clock (forward when positive) without moving the timers. */
  void jump(Duration by) {
    jumpMillis += by.toMillis();
    if (by.toMillis() > 0) forwardMillis += by.toMillis();
    jumpsFrom.put(loop.nowMillis(), jumpMillis);
  }

  long jumpedMillis() {
    return jumpMillis;
  }

  /**
   * The forward jumps so far (equal to {@link #jumpedMillis} while the clock never stepped back).
   */
  long jumpedForwardMillis() {
    return forwardMillis;
  }

  /** The cumulative jump as the clock read at virtual time {@code virtualMillis}. */
  long jumpedAt(long virtualMillis) {
    var e = jumpsFrom.floorEntry(virtualMillis);
    return e == null ? 0 : e.getValue();
  }

  @Override
  public Instant instant() {
    return epoch.plusMillis(loop.nowMillis() + jumpMillis);
  }

  @Override
  public long millis() {
    return epoch.toEpochMilli() + loop.nowMillis() + jumpMillis;
  }

  @Override
  public ZoneId getZone() {
    return ZoneOffset.UTC;
  }

  @Override
  public Clock withZone(ZoneId zone) {
    throw new UnsupportedOperationException("the simulation's clock is UTC");
  }
}
