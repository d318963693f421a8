package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.engine.catalog.Catalog;
import dev.tickmark.engine.host.Listing;
import dev.tickmark.engine.host.WorkloadNeeds;
import dev.tickmark.engine.host.verification.Verification;
import dev.tickmark.engine.money.Money;
import dev.tickmark.persistence.hosts.HostReadModel;
import java.time.Clock;
import java.util.List;
import java.util.Optional;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * Public, unauthenticated market data: the catalog and live capacity. Offers never identify a host.
 */
public final class MarketRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final java.util.List<Operation> OPERATIONS =
      java.util.List.of(
          Operation.get("/v1/catalog/gpus"),
          Operation.get("/v1/catalog/regions"),
          Operation.get("/v1/offers"));

  record GpuView(
      String code,
      String name,
      String vendor,
      String architecture,
      int vramGb,
      String memoryType,
      int bandwidthGbPerS,
      int fp16Tflops,
      List<String> reportedNames) {}

  record GpuList(List<GpuView> gpus) {}

  record RegionList(List<Catalog.Region> regions) {}

  record OfferView(
      String gpu,
      String region,
      String tier,
      int availableCards,
      String lowestPricePerGpuHour,
      int hosts,
      boolean simulated) {}

  record OfferList(List<OfferView> offers) {}

  private final Catalog catalog;
  private final HostReadModel hosts;
  private final Clock clock;

  public MarketRoutes(Catalog catalog, HostReadModel hosts, Clock clock) {
    this.catalog = catalog;
    this.hosts = hosts;
    this.clock = clock;
  }

  public Route route() {
    return concat(
        pathPrefix(
            "catalog",
            () ->
                concat(
                    path(
                        "gpus",
                        () ->
                            get(
                                () ->
                                    complete(
                                        Responses.json(
                                            200,
                                            new GpuList(
                                                catalog.gpus().stream()
                                                    .map(
                                                        g ->
                                                            new GpuView(
                                                                g.code(),
                                                                g.name(),
                                                                g.vendor(),
                                                                g.architecture(),
                                                                g.vramGb(),
                                                                g.memoryType(),
                                                                g.bandwidthGbPerS(),
                                                                g.fp16Tflops(),
                                                                g.smiNames()))
                                                    .toList()))))),
                    path(
                        "regions",
                        () ->
                            get(
                                () ->
                                    complete(
                                        Responses.json(200, new RegionList(catalog.regions()))))))),
        path(
            "offers",
            () ->
                get(
                    () ->
                        parameterOptional(
                            "gpu",
                            gpu ->
                                parameterOptional(
                                    "region",
                                    region ->
                                        parameterOptional(
                                            "tier",
                                            tier ->
                                                parameterOptional(
                                                    "max_price",
                                                    maxPrice ->
                                                        parameterOptional(
                                                            "network",
                                                            network ->
                                                                parameterOptional(
                                                                    "runtime",
                                                                    runtime ->
                                                                        offers(
                                                                            gpu, region, tier,
                                                                            maxPrice, network,
                                                                            runtime))))))))));
  }

  private Route offers(
      Optional<String> gpu,
      Optional<String> region,
      Optional<String> tier,
      Optional<String> maxPrice,
      Optional<String> network,
      Optional<String> runtime) {
    gpu.ifPresent(
        g -> {
          if (catalog.gpu(g).isEmpty())
            throw Problem.badRequest("unknown_gpu", "no GPU model \"" + g + "\" in the catalog");
        });
    region.ifPresent(
        r -> {
          if (catalog.region(r).isEmpty())
            throw Problem.badRequest("unknown_region", "no region \"" + r + "\" in the catalog");
        });
    Listing.Tier t = tier.map(MarketRoutes::tier).orElse(null);
    Long max = maxPrice.map(p -> Amounts.parse("max_price", p)).orElse(null);
    boolean withNetwork = network.map(MarketRoutes::network).orElse(false);
    var filter =
        new HostReadModel.OfferFilter(
            gpu.orElse(null),
            region.orElse(null),
            t,
            max,
            withNetwork,
            runtime.map(MarketRoutes::runtime).orElse(null));
    return onSuccess(
        hosts.offers(filter, clock.instant()),
        offers ->
            complete(
                Responses.json(
                    200,
                    new OfferList(
                        offers.stream()
                            .map(
                                o ->
                                    new OfferView(
                                        o.gpu(),
                                        o.region(),
                                        o.tier().wire(),
                                        o.availableCards(),
                                        Money.format(o.lowestPricePerGpuHour()),
                                        o.hosts(),
                                        o.simulated()))
                            .toList()))));
  }

  /** {@code network=true}: only capacity a rental with outbound network can use. */
  static boolean network(String s) {
    return switch (s) {
      case "true" -> true;
      case "false" -> false;
      default -> throw Problem.badRequest("invalid_network", "network must be true or false");
    };
  }

  /** A runtime a renter may ask for by name: {@code docker}, {@code sandbox} or {@code process}. */
  static String runtime(String s) {
    if (!WorkloadNeeds.known(s))
      throw Problem.badRequest(
          "invalid_runtime", "runtime must be one of " + String.join(", ", Verification.RUNTIMES));
    return s;
  }

  static Listing.Tier tier(String s) {
    try {
      return Listing.Tier.fromWire(s);
    } catch (IllegalArgumentException e) {
      throw Problem.badRequest("invalid_tier", "tier must be on_demand or spot");
    }
  }
}
