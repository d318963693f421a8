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

  SimClock(SimLoop loop, Instant epoch) {
    this.loop = loop;
    this.epoch = epoch;
  }

  /** Steps the wall clock (forward when positive) without moving the timers. */
  void jump(Duration by) {
    jumpMillis += by.toMillis();
  }

  long jumpedMillis() {
    return jumpMillis;
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
