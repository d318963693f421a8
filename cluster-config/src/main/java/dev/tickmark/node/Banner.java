package dev.tickmark.node;

import dev.tickmark.engine.money.Money;
import java.io.PrintStream;

/**
 * What a person starting a node needs to see once, on the console and deliberately not in the log:
 * the URL, the generated operator token, and in dev mode a funded key with commands to try.
 */
final class Banner {
  private final Node node;
  private final PrintStream out = System.out;

  Banner(Node node) {
    this.node = node;
  }

  void printProduction() {
    out.println();
    out.println("Tickmark node ready at " + node.baseUrl());
    if (node.settings().operatorTokenGenerated()) {
      out.println(
          "Operator token (generated; shown once, set TICKMARK_OPERATOR_TOKEN to choose one): "
              + node.settings().operatorToken());
    }
    out.println();
  }

  void printDev(DevBootstrap.Demo renter) {
    String url = node.baseUrl();
    out.println();
    out.println(
        "==================================================================================");
    out.println(" Tickmark dev node ready");
    out.println("  API:             " + url);
    if (node.tls() != null)
      out.println(
          "  TLS:             HTTPS/WSS only; clients trust "
              + node.tls().certificateFile()
              + " (curl --cacert, tickmark --ca)");
    out.println("  Operator token:  " + node.settings().operatorToken());
    out.println("  Webhook secret:  " + node.settings().webhookSecret());
    out.println(
        "  Demo renter:     "
            + renter.renterId()
            + "  balance "
            + Money.format(renter.renter().balance())
            + " EUR");
    out.println(
        "  Simulated host:  "
            + renter.hostId()
            + "  ("
            + DevBootstrap.SIMULATED_GPUS
            + ", "
            + renter.hostStatus()
            + ", listed at 2.49 EUR/GPU-hour)");
    out.println(
        "  Rentals run in:  "
            + ("process".equals(renter.runtime())
                ? "plain processes, NOT isolated (bubblewrap is missing: apt-get install bubblewrap)"
                : renter.runtime() + (renter.runtime().equals("sandbox") ? " (bubblewrap)" : "")));
    out.println("  Renter API key:  " + renter.apiKey() + "   (shown once)");
    out.println();
    out.println(" Try:");
    out.println(
        "  curl -s -H 'Authorization: Bearer " + renter.apiKey() + "' " + url + "/v1/account");
    out.println(
        "  curl -s -H 'Authorization: Bearer "
            + renter.apiKey()
            + "' "
            + url
            + "/v1/account/ledger");
    out.println("  curl -s " + url + "/v1/offers");
    out.println(
        "  curl -s -X POST -H 'Authorization: Bearer "
            + node.settings().operatorToken()
            + "' -H 'Content-Type: application/json' \\");
    out.println(
        "       -d '{\"amount\":\"25.00\",\"reference\":\"try-1\"}' "
            + url
            + "/ops/accounts/"
            + renter.renterId()
            + "/deposits");
    out.println(
        "  curl -s -H 'Authorization: Bearer "
            + node.settings().operatorToken()
            + "' "
            + url
            + "/ops/ledger/audit");
    out.println();
    out.println(" Or with the CLI (bin/install-cli puts 'tickmark' on your PATH; docs/cli.md):");
    out.println(
        "  echo '"
            + renter.apiKey()
            + "' | bin/tickmark login --url "
            + url
            + (node.tls() == null ? "" : " --ca " + node.tls().certificateFile()));
    out.println("  bin/tickmark offers");
    out.println("  bin/tickmark launch --gpu h100-80gb --max-price 3.00 -- sleep 3600");
    out.println("  bin/tickmark usage RENTAL_ID --follow");
    out.println(
        "  TICKMARK_OPERATOR_TOKEN=" + node.settings().operatorToken() + " bin/tickmark ops audit");
    out.println(
        "==================================================================================");
    out.println();
  }
}
