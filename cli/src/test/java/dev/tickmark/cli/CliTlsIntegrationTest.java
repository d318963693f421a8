package dev.tickmark.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import dev.tickmark.node.ServerTls;
import dev.tickmark.node.TestCertificates;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The CLI against a node serving HTTPS with a test CA's certificate: {@code --ca} (or {@code
 * $TICKMARK_CA}, or the one saved at login) makes it trusted; without it the CLI refuses the
 * unknown CA in one readable line (exit 3), never a stack trace; a certificate for another name is
 * refused even with the right CA (host names are verified).
 */
class CliTlsIntegrationTest {
  @TempDir static Path certs;
  static TestCertificates certificates;
  static TestMarket market;

  @TempDir Path temp;

  @BeforeAll
  static void startNode() throws Exception {
    certificates = TestCertificates.create(certs.resolve("node"), "RSA");
    market =
        TestMarket.start(
            "cli_tls",
            Map.of(
                "tickmark.http.tls.certificate", certificates.certificateFile().toString(),
                "tickmark.http.tls.private-key", certificates.keyFile().toString()));
    assertTrue(market.url().startsWith("https://"), market.url());
  }

  @AfterAll
  static void stopNode() throws Exception {
    if (market != null) market.close();
  }

  private CliRunner cli(String url, String apiKey) {
    return new CliRunner(temp.resolve("config.json"))
        .withEnv("TICKMARK_URL", url)
        .withEnv("TICKMARK_API_KEY", apiKey);
  }

  @Test
  void trustsTheNodeWithCa() {
    TestMarket.Customer renter = market.signUp("TLS renter");
    CliRunner.Result viaFlag =
        cli(market.url(), renter.apiKey())
            .run("account", "--ca", certificates.caFile().toString())
            .ok();
    assertTrue(viaFlag.out().contains("TLS renter"), viaFlag.out());
    cli(market.url(), renter.apiKey())
        .withEnv("TICKMARK_CA", certificates.caFile().toString())
        .run("account")
        .ok();
    // the certificate names localhost too
    cli(market.url().replace("127.0.0.1", "localhost"), renter.apiKey())
        .run("account", "--ca", certificates.caFile().toString())
        .ok();
  }

  @Test
  void refusesAnUnknownCaInOneLine() {
    TestMarket.Customer renter = market.signUp("TLS stranger");
    CliRunner.Result refused = cli(market.url(), renter.apiKey()).run("account");
    refused.expect(Cli.EXIT_UNREACHABLE);
    assertEquals("", refused.out());
    assertEquals(1, refused.err().lines().count(), refused.err());
    assertTrue(
        refused.err().contains("not signed by a CA this machine trusts (pass --ca FILE"),
        refused.err());
    assertFalse(refused.err().contains("Exception"), refused.err());
  }

  @Test
  void loginSavesTheCaForLaterCommands() {
    TestMarket.Customer renter = market.signUp("TLS login");
    CliRunner runner =
        new CliRunner(temp.resolve("config.json")).withEnv("TICKMARK_URL", market.url());
    runner
        .runWithInput(renter.apiKey() + "\n", "login", "--ca", certificates.caFile().toString())
        .ok();
    CliRunner saved = new CliRunner(temp.resolve("config.json"));
    CliRunner.Result account = saved.run("account").ok();
    assertTrue(account.out().contains("TLS login"), account.out());
  }

  @Test
  void aBrokenCaFileIsBadUsage() throws Exception {
    Path junk = temp.resolve("junk.pem");
    Files.writeString(junk, "no certificates here\n");
    CliRunner.Result bad = cli(market.url(), "tmk_x_y").run("account", "--ca", junk.toString());
    bad.expect(Cli.EXIT_USAGE);
    assertTrue(bad.err().contains("Bad --ca"), bad.err());
  }

  @Test
  void refusesACertificateForAnotherNameEvenFromTheTrustedCa() throws Exception {
    TestCertificates elsewhere =
        TestCertificates.create(certs.resolve("elsewhere"), "EC", "elsewhere.test");
    HttpsServer server = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setHttpsConfigurator(
        new HttpsConfigurator(
            ServerTls.load(elsewhere.certificateFile(), elsewhere.keyFile()).sslContext()));
    server.createContext(
        "/",
        exchange -> {
          byte[] body = "{}".getBytes(StandardCharsets.UTF_8);
          exchange.sendResponseHeaders(200, body.length);
          exchange.getResponseBody().write(body);
          exchange.close();
        });
    server.start();
    try {
      CliRunner.Result refused =
          cli("https://127.0.0.1:" + server.getAddress().getPort(), "tmk_x_y")
              .run("account", "--ca", elsewhere.caFile().toString());
      refused.expect(Cli.EXIT_UNREACHABLE);
      assertTrue(refused.err().contains("not for this address"), refused.err());
      assertEquals(1, refused.err().lines().count(), refused.err());
    } finally {
      server.stop(0);
    }
  }
}
