package dev.tickmark.http;

import dev.tickmark.engine.host.Host;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.hosts.HostReadModel;
import dev.tickmark.persistence.rentals.RentalReadModel;
import java.time.Instant;
import java.util.List;
import java.util.Locale;

/** Wire forms of hosts and listings. Prices are strings of euros per GPU-hour. */
final class HostViews {
  private HostViews() {}

  record WindowView(String day, String start, String end) {
    static WindowView of(Listing.Window w) {
      return new WindowView(
          w.day().name().substring(0, 3).toLowerCase(Locale.ROOT),
          hhmm(w.startMinute()),
          hhmm(w.endMinute()));
    }
  }

  record ListingView(
      String onDemandPricePerGpuHour,
      String spotPricePerGpuHour,
      int spotNoticeSeconds,
      List<WindowView> availability,
      boolean listed) {
    static ListingView of(Listing l) {
      return new ListingView(
          l.onDemandPrice() > 0 ? Money.format(l.onDemandPrice()) : null,
          l.spotPrice() == null ? null : Money.format(l.spotPrice()),
          l.spotNoticeSeconds(),
          l.availability().stream().map(WindowView::of).toList(),
          l.listed());
    }
  }

  record CheckView(String check, String status, String observed, String expected) {
    static CheckView of(Verification.Check c) {
      return new CheckView(c.check(), c.status().wire(), c.observed(), c.expected());
    }
  }

  record CardView(int index, String uuid, String gpu, String state) {}

  /**
   * How the host's agent runs rentals ({@code docker}, {@code sandbox}, {@code process}) and
   * whether it can give a rental outbound network; null until an agent of 2026-12-07 or later has
   * said so in a passed report.
   */
  record RuntimeView(String name, boolean network) {
    static RuntimeView of(Verification.WorkloadRuntime r) {
      return r == null ? null : new RuntimeView(r.name(), r.network());
    }

    static RuntimeView of(String name, Boolean network) {
      return name == null || network == null ? null : new RuntimeView(name, network);
    }
  }

  /** The provider's (or operator's) full view of one host. The renter on a card is never named. */
  record HostDetail(
      String id,
      String region,
      String label,
      String status,
      boolean online,
      boolean listed,
      boolean draining,
      boolean simulated,
      String gpu,
      List<CardView> cards,
      ListingView listing,
      List<CheckView> verification,
      Instant lastHeartbeatAt,
      Instant registeredAt,
      String evictionReason,
      Instant verificationRequestedAt,
      Instant lastVerificationAt,
      RuntimeView runtime,
      String ownerId) {
    static HostDetail of(Host.HostView v, boolean forOperator) {
      return new HostDetail(
          v.hostId(),
          v.region(),
          v.label(),
          v.status(),
          v.online(),
          v.listed(),
          v.draining(),
          v.simulated(),
          v.gpu(),
          v.cards().stream()
              .map(c -> new CardView(c.index(), c.uuid(), c.gpu(), c.state()))
              .toList(),
          ListingView.of(v.listing()),
          v.checks().stream().map(CheckView::of).toList(),
          v.lastHeartbeatAt(),
          v.registeredAt(),
          v.evictionReason(),
          v.verificationRequestedAt(),
          v.lastVerificationAt(),
          RuntimeView.of(v.runtime()),
          forOperator ? v.ownerId() : null);
    }
  }

  record HostSummary(
      String id,
      String region,
      String label,
      String status,
      boolean online,
      boolean listed,
      boolean draining,
      boolean simulated,
      String gpu,
      int cardsTotal,
      int cardsFree,
      String onDemandPricePerGpuHour,
      String spotPricePerGpuHour,
      Instant registeredAt,
      Instant updatedAt,
      long rentalsEnded,
      long rentalsLost,
      RuntimeView runtime,
      String ownerId) {
    static HostSummary of(HostReadModel.HostRow r, boolean forOperator) {
      return new HostSummary(
          r.hostId(),
          r.region(),
          r.label(),
          r.status(),
          r.online(),
          r.listed(),
          r.draining(),
          r.simulated(),
          r.gpu(),
          r.cardsTotal(),
          r.cardsFree(),
          r.onDemandPrice() == null || r.onDemandPrice() == 0
              ? null
              : Money.format(r.onDemandPrice()),
          r.spotPrice() == null ? null : Money.format(r.spotPrice()),
          r.createdAt(),
          r.updatedAt(),
          r.reliability().rentalsEnded(),
          r.reliability().rentalsLost(),
          RuntimeView.of(r.runtime(), r.offersNetwork()),
          forOperator ? r.ownerId() : null);
    }
  }

  /**
   * One page of hosts; {@code nextAfter} is the cursor for the next page ({@code null} on the last
   * one). Its page size is a host's rentals' too.
   */
  record HostList(List<HostSummary> hosts, String nextAfter) {
    static final int MAX_PAGE = 200;
    static final int DEFAULT_PAGE = 50;

    /** {@code ?limit=}: 1 to {@value #MAX_PAGE}, {@value #DEFAULT_PAGE} when absent. */
    static int limit(java.util.Optional<String> text) {
      return text.map(l -> Params.positiveInt("limit", l, MAX_PAGE)).orElse(DEFAULT_PAGE);
    }

    /** {@code ?after=}: a cursor a previous page returned, or absent for the first page. */
    static String after(java.util.Optional<String> text) {
      text.ifPresent(
          a -> {
            if (!Ids.wellFormed("host_", a))
              throw Problem.badRequest(
                  "invalid_parameter", "after must be a cursor returned by a previous page");
          });
      return text.orElse(null);
    }

    /** A full page may have more after it; a short one is the last. */
    static HostList of(List<HostReadModel.HostRow> rows, int limit, boolean forOperator) {
      return new HostList(
          rows.stream().map(r -> HostSummary.of(r, forOperator)).toList(),
          rows.size() == limit ? rows.get(rows.size() - 1).hostId() : null);
    }
  }

  /**
   * A rental that ran on the provider's host: never its renter, its image or its command; {@code
   * earned} is the provider's share through its latest settlement (a running rental's grows every
   * settle interval).
   */
  record HostRentalView(
      String id,
      String status,
      String gpu,
      int count,
      String tier,
      String pricePerGpuHour,
      boolean simulated,
      Instant matchedAt,
      Instant startedAt,
      Instant endedAt,
      String endReason,
      long billedSeconds,
      String earned) {
    static HostRentalView of(RentalReadModel.HostRentalRow r) {
      return new HostRentalView(
          r.rentalId(),
          r.status(),
          r.gpu(),
          r.count(),
          r.tier(),
          r.pricePerGpuHour() == null ? null : Money.format(r.pricePerGpuHour()),
          r.simulated(),
          r.matchedAt(),
          r.startedAt(),
          r.endedAt(),
          r.endReason(),
          r.billedSeconds(),
          Money.format(r.providerEarned()));
    }
  }

  /** Every rental matched to the host: how many, card-seconds billed, what they earned. */
  record HostRentalTotals(long rentals, long cardSeconds, String earned) {
    static HostRentalTotals of(RentalReadModel.HostTotals t) {
      return new HostRentalTotals(t.rentals(), t.cardSeconds(), Money.format(t.providerEarned()));
    }
  }

  /** One page of a host's rentals and the host's totals (over all of them, not the page). */
  record HostRentalList(
      String hostId, List<HostRentalView> rentals, String nextAfter, HostRentalTotals totals) {
    static HostRentalList of(
        String hostId,
        List<RentalReadModel.HostRentalRow> rows,
        int limit,
        RentalReadModel.HostTotals totals) {
      return new HostRentalList(
          hostId,
          rows.stream().map(HostRentalView::of).toList(),
          rows.size() == limit ? Long.toString(rows.get(rows.size() - 1).rowId()) : null,
          HostRentalTotals.of(totals));
    }
  }

  static String hhmm(int minute) {
    return String.format(Locale.ROOT, "%02d:%02d", minute / 60, minute % 60);
  }
}
