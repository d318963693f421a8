package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Public market data, no API key needed: {@code catalog}, {@code catalog regions}, {@code offers}.
 */
final class MarketCommands {
  private MarketCommands() {}

  @Command(
      name = "catalog",
      description = "The GPU models the market knows (same as 'catalog gpus').",
      subcommands = {Catalog.Gpus.class, Catalog.Regions.class})
  static final class Catalog extends ApiCommand {
    @Override
    int execute() {
      return gpus(this);
    }

    static int gpus(ApiCommand command) {
      Http.Reply reply = command.anonymous().get("/v1/catalog/gpus");
      if (command.json()) {
        command.printJson(reply);
        return Cli.EXIT_OK;
      }
      Table table =
          new Table(
              "CODE", "NAME", "VENDOR", "ARCHITECTURE", "VRAM GB", "MEMORY", "GB/S", "FP16 TFLOPS");
      for (JsonNode g : reply.json().path("gpus")) {
        table.row(
            g.get("code"),
            g.get("name"),
            g.get("vendor"),
            g.get("architecture"),
            g.get("vram_gb"),
            g.get("memory_type"),
            g.get("bandwidth_gb_per_s"),
            g.get("fp16_tflops"));
      }
      table.print(command.out());
      return Cli.EXIT_OK;
    }

    @Command(
        name = "gpus",
        description =
            "The GPU models: code, name, vendor, architecture, memory, bandwidth, FP16 TFLOPS.")
    static final class Gpus extends ApiCommand {
      @Override
      int execute() {
        return gpus(this);
      }
    }

    @Command(name = "regions", description = "The regions hosts can be in.")
    static final class Regions extends ApiCommand {
      @Override
      int execute() {
        Http.Reply reply = anonymous().get("/v1/catalog/regions");
        if (json()) {
          printJson(reply);
          return Cli.EXIT_OK;
        }
        Table table = new Table("CODE", "NAME", "LOCATION");
        for (JsonNode r : reply.json().path("regions"))
          table.row(r.get("code"), r.get("name"), r.get("location"));
        table.print(out());
        return Cli.EXIT_OK;
      }
    }
  }

  @Command(
      name = "offers",
      description = {
        "Live capacity: free cards and the lowest price per GPU model, region and tier.",
        "Hosts are never named. Prices are EUR per GPU-hour."
      })
  static final class Offers extends ApiCommand {
    @Option(
        names = "--gpu",
        paramLabel = "CODE",
        description = "Only this GPU model (see 'tickmark catalog').")
    String gpu;

    @Option(
        names = "--region",
        paramLabel = "CODE",
        description = "Only this region (see 'tickmark catalog regions').")
    String region;

    @Option(names = "--tier", paramLabel = "TIER", description = "on_demand or spot.")
    String tier;

    @Option(
        names = "--max-price",
        paramLabel = "EUR",
        description = "Only offers at or below this price per GPU-hour.")
    String maxPrice;

    @Option(
        names = "--network",
        description = "Only capacity a rental with outbound network can use ('launch --network').")
    boolean network;

    @Option(
        names = "--runtime",
        paramLabel = "NAME",
        description = "Only capacity on hosts that use this runtime ('launch --runtime').")
    String runtime;

    @Override
    int execute() {
      Http.Reply reply =
          anonymous()
              .get(
                  "/v1/offers"
                      + query(
                          params(
                              "gpu",
                              gpu,
                              "region",
                              region,
                              "tier",
                              tier,
                              "max_price",
                              maxPrice,
                              "network",
                              network ? "true" : null,
                              "runtime",
                              runtime)));
      if (json()) {
        printJson(reply);
        return Cli.EXIT_OK;
      }
      Table table =
          new Table("GPU", "REGION", "TIER", "FREE CARDS", "FROM EUR/GPU-H", "HOSTS", "SIMULATED");
      for (JsonNode o : reply.json().path("offers")) {
        table.row(
            o.get("gpu"),
            o.get("region"),
            o.get("tier"),
            o.get("available_cards"),
            o.get("lowest_price_per_gpu_hour"),
            o.get("hosts"),
            o.path("simulated").asBoolean() ? "yes" : "no");
      }
      if (table.isEmpty()) out().println("No offers match.");
      else table.print(out());
      return Cli.EXIT_OK;
    }
  }
}
