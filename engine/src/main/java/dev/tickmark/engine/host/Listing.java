package dev.tickmark.engine.host;

import dev.tickmark.engine.CborSerializable;
import java.time.DayOfWeek;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.List;

/**
 * A host's terms: floor prices in µ€ per GPU-hour, the spot notice, weekly UTC availability windows
 * (none = always available) and whether it is on the market at all.
 */
public record Listing(
    long onDemandPrice,
    Long spotPrice,
    int spotNoticeSeconds,
    List<Window> availability,
    boolean listed)
    implements CborSerializable {

  public static final int MIN_SPOT_NOTICE_SECONDS = 120;
  public static final int MAX_SPOT_NOTICE_SECONDS = 3600;
  public static final int DEFAULT_SPOT_NOTICE_SECONDS = 300;

  public static Listing unlisted() {
    return new Listing(0, null, DEFAULT_SPOT_NOTICE_SECONDS, List.of(), false);
  }

  /**
   * One weekly window in UTC: {@code day} from {@code startMinute} (inclusive) to {@code endMinute}
   * (exclusive, ≤ 1440).
   */
  public record Window(DayOfWeek day, int startMinute, int endMinute) implements CborSerializable {
    public boolean contains(DayOfWeek d, int minuteOfDay) {
      return d == day && minuteOfDay >= startMinute && minuteOfDay < endMinute;
    }
  }

  /** Why these terms cannot be accepted, or {@code null} when they can. */
  public String problem() {
    if (listed && onDemandPrice <= 0) return "a listed host needs an on-demand price above zero";
    if (onDemandPrice < 0) return "prices cannot be negative";
    if (spotPrice != null && spotPrice <= 0) return "a spot price must be above zero";
    if (spotNoticeSeconds < MIN_SPOT_NOTICE_SECONDS
        || spotNoticeSeconds > MAX_SPOT_NOTICE_SECONDS) {
      return "spot notice must be between "
          + MIN_SPOT_NOTICE_SECONDS
          + " and "
          + MAX_SPOT_NOTICE_SECONDS
          + " seconds";
    }
    for (Window w : availability) {
      if (w.day() == null
          || w.startMinute() < 0
          || w.endMinute() > 1440
          || w.startMinute() >= w.endMinute()) {
        return "an availability window needs a day and a start before its end within the day";
      }
    }
    if (availability.size() > 64) return "at most 64 availability windows";
    return null;
  }

  public boolean availableAt(Instant instant) {
    if (availability.isEmpty()) return true;
    ZonedDateTime utc = instant.atZone(ZoneOffset.UTC);
    int minute = utc.getHour() * 60 + utc.getMinute();
    for (Window w : availability) {
      if (w.contains(utc.getDayOfWeek(), minute)) return true;
    }
    return false;
  }

  /**
   * When availability next ends, looking no further than {@code horizon} from {@code from} (minute
   * steps); {@code null} if it stays available that long. Adjacent windows count as one.
   */
  public Instant availabilityEnds(Instant from, java.time.Duration horizon) {
    if (availability.isEmpty()) return null;
    Instant t = from.truncatedTo(java.time.temporal.ChronoUnit.MINUTES);
    Instant limit = from.plus(horizon);
    while (!t.isAfter(limit)) {
      if (!availableAt(t)) return t.isBefore(from) ? from : t;
      t = t.plusSeconds(60);
    }
    return null;
  }

  /** The floor for a tier, or {@code null} if this host does not offer it. */
  public Long floorFor(Tier tier) {
    return tier == Tier.SPOT ? spotPrice : (onDemandPrice > 0 ? onDemandPrice : null);
  }

  public enum Tier {
    ON_DEMAND,
    SPOT;

    public String wire() {
      return this == ON_DEMAND ? "on_demand" : "spot";
    }

    public static Tier fromWire(String s) {
      return switch (s) {
        case "on_demand" -> ON_DEMAND;
        case "spot" -> SPOT;
        default -> throw new IllegalArgumentException("tier must be on_demand or spot");
      };
    }
  }
}
