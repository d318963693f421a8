package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.agent.Agent;
import dev.tickmark.agent.AgentConfig;
import dev.tickmark.console.Cookbook;
import dev.tickmark.console.Estimator;
import dev.tickmark.persistence.TestDatabase;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.DayOfWeek;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.JavascriptExecutor;
import org.openqa.selenium.Keys;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.StaleElementReferenceException;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.logging.LogEntry;
import org.openqa.selenium.logging.LogType;
import org.openqa.selenium.logging.LoggingPreferences;
import org.openqa.selenium.support.ui.ExpectedConditions;
import org.openqa.selenium.support.ui.Select;
import org.openqa.selenium.support.ui.WebDriverWait;

/**
 * The web console in a real headless Chromium (Debian's, driven by Debian's chromedriver) against a
 * real node, PostgreSQL and an in-process agent with simulated GPUs: the steps a renter, a provider
 * and an operator take, each page checked for script errors and CSP violations, unlabelled inputs
 * and controls out of keyboard reach, and photographed under {@code target/console-screenshots/}.
 * One node and one browser session serve every step, in order. Skipped, saying why, where Chromium
 * or its driver is missing, except where {@code TICKMARK_TESTS_REQUIRE} names {@code chromium} (CI
 * installs both): there it fails.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ConsoleBrowserTest {
  static final Duration WAIT = RentingSupport.WAIT;
  static final String REGION = "eu-nl";
  static final Path CHROMIUM = Path.of("/usr/bin/chromium");
  static final Path DRIVER = Path.of("/usr/bin/chromedriver");
  static final Path SHOTS = Path.of("target", "console-screenshots");
  static final Path KNOWN_VALUES =
      Path.of("..", "console", "src", "test", "resources", "estimator-known-values.json");

  static Node node;
  static ApiClient api;
  static Agent agent;
  static String hostId;
  static ApiClient.Customer provider;
  static ApiClient.Customer renter;
  static ChromeDriver driver;
  static WebDriverWait wait;
  static String rentalId;
  @TempDir static Path temp;

  @BeforeAll
  static void start() throws Exception {
    String missing =
        !Files.isExecutable(CHROMIUM)
            ? "no " + CHROMIUM
            : !Files.isExecutable(DRIVER) ? "no " + DRIVER : null;
    String why =
        missing
            + ": the console's browser tests are skipped (apt-get install chromium chromium-driver;"
            + " CI installs them)";
    if (System.getenv().getOrDefault("TICKMARK_TESTS_REQUIRE", "").contains("chromium"))
      Assertions.assertNull(missing, why);
    Assumptions.assumeTrue(missing == null, why);

    node = Node.start(RentingSupport.renting(TestNodes.settings(TestDatabase.fresh("console_ui"))));
    api = new ApiClient(node.baseUrl());
    provider = api.signUp("Console provider");
    String token =
        api.post(
                "/v1/hosts/registration-tokens",
                provider.apiKey(),
                "{\"region\":\"" + REGION + "\",\"label\":\"rack-7\"}")
            .expect(201)
            .text("token");
    agent =
        Agent.start(
            AgentConfig.simulated(
                    "ws://127.0.0.1:" + node.httpPort(),
                    token,
                    temp.resolve("agent"),
                    "h100-80gb:2")
                .withRuntime(AgentConfig.RuntimeKind.PROCESS));
    hostId = agent.welcomed().get(WAIT.toSeconds(), TimeUnit.SECONDS).hostId();
    assertEquals("verified", agent.verified().get(WAIT.toSeconds(), TimeUnit.SECONDS).status());
    api.put(
            "/v1/hosts/" + hostId + "/listing",
            provider.apiKey(),
            "{\"on_demand_price_per_gpu_hour\":\"2.49\",\"listed\":true}")
        .expect(200);
    renter = RentingSupport.renter(api, "Console renter", "50.00");
    Eventually.eventually(
        WAIT,
        () ->
            assertTrue(
                api.get("/v1/offers?region=" + REGION, null).json().get("offers").size() > 0));

    ChromeOptions options = new ChromeOptions();
    options.setBinary(CHROMIUM.toFile());
    options.addArguments(
        "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1100");
    LoggingPreferences logs = new LoggingPreferences();
    logs.enable(LogType.BROWSER, Level.ALL);
    options.setCapability("goog:loggingPrefs", logs);
    // the driver given explicitly: Selenium never looks for (or downloads) one of its own
    ChromeDriverService service =
        new ChromeDriverService.Builder().usingDriverExecutable(DRIVER.toFile()).build();
    driver = new ChromeDriver(service, options);
    wait = new WebDriverWait(driver, WAIT, Duration.ofMillis(200));
    // The console redraws a view when its data arrives: an element found just before a redraw is
    // stale when read, and the condition is simply asked again (CI once failed on it in
    // aProviderChecksAgainAndSeesTheNewVerdict).
    wait.ignoring(StaleElementReferenceException.class);
    Files.createDirectories(SHOTS);
  }

  @AfterAll
  static void stop() throws Exception {
    if (driver != null) driver.quit();
    if (agent != null) agent.close();
    if (node != null) node.close();
  }

  /** A failed step leaves a picture of the page it failed on. */
  @org.junit.jupiter.api.extension.RegisterExtension
  static final org.junit.jupiter.api.extension.TestWatcher FAILURES =
      new org.junit.jupiter.api.extension.TestWatcher() {
        @Override
        public void testFailed(
            org.junit.jupiter.api.extension.ExtensionContext context, Throwable cause) {
          if (driver != null) shot("failed-" + context.getRequiredTestMethod().getName());
        }
      };

  /** Every step leaves the page free of script errors and CSP violations. */
  @AfterEach
  void noScriptErrors() {
    if (driver == null) return;
    assertNoScriptErrors();
  }

  // ---- public pages

  @Test
  @Order(1)
  void theOffersPageShowsTheListedHostsPrice() {
    visit("#/offers", "offers");
    WebElement offers = driver.findElement(By.id("offers"));
    assertTrue(offers.getText().contains("NVIDIA H100"), offers.getText());
    assertTrue(offers.getText().contains("€2.490000"), offers.getText());
    shot("offers");
  }

  @Test
  @Order(2)
  void theCookbookPicksTheCheapestCardThatHoldsAModelAndSaysItErrsUpward() {
    visit("#/cookbook", "cookbook");
    new Select(driver.findElement(By.name("model"))).selectByValue("llama-3.1-8b");
    new Select(driver.findElement(By.name("precision"))).selectByValue("int8");
    WebElement context = driver.findElement(By.name("context"));
    context.clear();
    context.sendKeys("8192", Keys.TAB);
    // 10.33 GiB: one H100 (the only card offered) at its live price
    wait.until(ExpectedConditions.textToBe(By.id("cheapest"), cheapestText()));
    assertTrue(driver.findElement(By.id("estimate")).getText().contains("10.33 GiB"));
    assertTrue(driver.findElement(By.id("caveat")).getText().contains("err upward"));
    // too big for any host: says so
    new Select(driver.findElement(By.name("model"))).selectByValue("deepseek-v3");
    new Select(driver.findElement(By.name("precision"))).selectByValue("bf16");
    wait.until(
        ExpectedConditions.textToBe(By.id("cheapest"), "no card count on one host holds it"));
    shot("cookbook");
  }

  private static String cheapestText() {
    Cookbook.Model m =
        Cookbook.load().stream().filter(x -> x.id().equals("llama-3.1-8b")).findFirst().get();
    Estimator.Gpu h100 = new Estimator.Gpu("h100-80gb", "NVIDIA H100 80GB", 80, 3350);
    double kv = Estimator.kvBytes(m, 8192, "fp16");
    double tps = Estimator.tokensPerSecond(m, "int8", kv, h100, 1);
    long perMillion = Estimator.perMillionTokensMicros(2_490_000, tps);
    String name =
        api.get("/v1/catalog/gpus", null).json().findValues("name").stream()
            .map(JsonNode::asText)
            .filter(n -> n.contains("H100"))
            .findFirst()
            .get();
    return String.format(
        Locale.ROOT,
        "1 × %s: €2.49/hour, about %.1f tokens/s, €%.2f per million tokens",
        name,
        tps,
        Math.ceil(perMillion / 10000.0) / 100);
  }

  @Test
  @Order(3)
  void theJobCostComparesPerSecondWithPerStartedHour() {
    visit("#/job-cost", "job-cost");
    type("price", "2.49");
    type("cards", "1");
    type("minutes", "0");
    type("seconds", "37");
    wait.until(ExpectedConditions.textToBe(By.id("per-second"), "€0.025591"));
    assertEquals("€2.490000", driver.findElement(By.id("per-hour")).getText());
    shot("job-cost");
  }

  @Test
  @Order(4)
  void theEarningsEstimatorGivesTheMonthlyTakeHome() {
    visit("#/earnings", "earnings");
    type("cards", "8");
    type("price", "2.00");
    type("utilisation", "60");
    type("fee", "15");
    wait.until(ExpectedConditions.textToBe(By.id("take-home"), "€5956.800000"));
    shot("earnings");
  }

  /**
   * estimator.js in the browser against the Java estimator, over every model of the cookbook at
   * every precision and three contexts, and against the hand-worked table both are tested with.
   */
  @Test
  @Order(5)
  void theBrowsersEstimatorComputesExactlyWhatTheJavaEstimatorDoes() throws Exception {
    JsonNode table = ApiClient.JSON.readTree(Files.readString(KNOWN_VALUES));
    List<Estimator.Gpu> gpus = new ArrayList<>();
    table
        .get("gpus")
        .forEach(
            g ->
                gpus.add(
                    new Estimator.Gpu(
                        g.get("code").asText(),
                        g.get("name").asText(),
                        g.get("vram_gb").asInt(),
                        g.get("bandwidth_gb_per_s").asInt())));
    List<Estimator.Offer> offers = new ArrayList<>();
    table
        .get("offers")
        .forEach(
            o ->
                offers.add(
                    new Estimator.Offer(
                        o.get("gpu").asText(),
                        o.get("tier").asText(),
                        o.get("available_cards").asInt(),
                        new BigDecimal(o.get("lowest_price_per_gpu_hour").asText())
                            .movePointRight(6)
                            .longValueExact())));
    List<String> expected = new ArrayList<>();
    for (Cookbook.Model m : Cookbook.load())
      for (String precision : List.of("fp16", "bf16", "fp8", "int8", "int4"))
        for (int context : new int[] {2048, 32768, 131072}) {
          Estimator.Estimate e = Estimator.estimate(m, precision, "fp16", context, gpus, offers);
          StringBuilder line = new StringBuilder(m.id() + " " + precision + " " + context);
          line.append(String.format(Locale.ROOT, " w=%.6e kv=%.6e", e.weightsBytes(), e.kvBytes()));
          for (Estimator.Option o : e.fits())
            line.append(
                String.format(
                    Locale.ROOT,
                    " %s×%d need=%.6e tps=%.6e h=%s m=%s",
                    o.gpu(),
                    o.cards(),
                    o.needBytes(),
                    o.tokensPerSecond(),
                    o.pricePerHourMicros(),
                    o.perMillionTokensMicros()));
          expected.add(line.toString());
        }
    visit("#/cookbook", "cookbook");
    @SuppressWarnings("unchecked")
    List<Object> actual =
        (List<Object>)
            driver.executeAsyncScript(
                "const [table, done] = [JSON.parse(arguments[0]), arguments[arguments.length - 1]];"
                    + "Promise.all([import('/console/estimator.js'),"
                    + " fetch('/console/cookbook.json').then(r => r.json())]).then(([E, book]) => {"
                    + " const sci = (x) => x.toExponential(6).replace(/e([+-])(\\d)$/, 'e$10$2');"
                    + " const out = [];"
                    + " for (const m of book.models) for (const p of ['fp16','bf16','fp8','int8','int4'])"
                    + "  for (const c of [2048, 32768, 131072]) {"
                    + "   const e = E.estimate(m, p, 'fp16', c, table.gpus, table.offers);"
                    + "   let line = `${m.id} ${p} ${c} w=${sci(e.weightsBytes)} kv=${sci(e.kvBytes)}`;"
                    + "   for (const o of e.fits) line += ` ${o.gpu}×${o.cards} need=${sci(o.needBytes)}"
                    + " tps=${sci(o.tokensPerSecond)} h=${o.pricePerHourMicros} m=${o.perMillionTokensMicros}`;"
                    + "   out.push(line); }"
                    + " const jobs = table.jobs.map(j => [E.eurosOf(E.perSecondCostMicros(E.microsOf(j.price), j.cards, j.seconds)),"
                    + "  E.eurosOf(E.perStartedHourCostMicros(E.microsOf(j.price), j.cards, j.seconds))].join(' '));"
                    + " const earnings = table.earnings.map(j => E.eurosOf(E.monthlyTakeHomeMicros(j.cards,"
                    + "  E.microsOf(j.price), j.utilisation_percent, j.fee_bps)));"
                    + " done([out, jobs, earnings]); }).catch(e => done(['failed: ' + e]));",
                table.toString());
    assertEquals(3, actual.size(), actual.toString());
    assertEquals(expected, actual.get(0));
    List<String> jobs = new ArrayList<>();
    table
        .get("jobs")
        .forEach(
            j -> jobs.add(j.get("per_second").asText() + " " + j.get("per_started_hour").asText()));
    assertEquals(jobs, actual.get(1));
    List<String> earnings = new ArrayList<>();
    table.get("earnings").forEach(j -> earnings.add(j.get("monthly").asText()));
    assertEquals(earnings, actual.get(2));
  }

  // ---- the renter

  @Test
  @Order(10)
  void aRenterSignsInWithAKeyAndSeesTheBalanceTheKeyHeldInSessionStorageOnly() {
    signIn(renter.apiKey());
    wait.until(ExpectedConditions.textToBe(By.id("balance"), "€50.000000"));
    assertEquals("€50.000000", driver.findElement(By.id("available")).getText());
    assertEquals(
        renter.apiKey(), js("return sessionStorage.getItem('tickmark.apiKey')"), "in the tab");
    assertEquals("", js("return document.cookie"), "never a cookie");
    assertEquals(0L, js("return localStorage.length"), "nothing kept past the tab");
    shot("account");
  }

  @Test
  @Order(11)
  void aRentalLaunchedFromTheFormTicksByItselfAndStreamsItsLogs() {
    visit("#/launch", "launch");
    assertFormReachableByTab("launch-form");
    new Select(driver.findElement(By.name("gpu"))).selectByValue("h100-80gb");
    new Select(driver.findElement(By.name("region"))).selectByValue(REGION);
    type("max_price_per_gpu_hour", "3.00");
    type("command", "for i in 1 2 3; do echo console-line-$i; done; sleep 600");
    shot("launch");
    driver.findElement(By.cssSelector("#launch-form button[type=submit]")).click();
    wait.until(ExpectedConditions.urlMatches("#/rentals/rnt_[A-Za-z0-9]+$"));
    rentalId = driver.getCurrentUrl().replaceAll(".*#/rentals/", "");
    awaitPage("rental");
    wait.until(ExpectedConditions.textToBe(By.id("status"), "running"));
    // the same element changes by itself: ticks over the event stream, no reload
    WebElement cost = driver.findElement(By.id("cost"));
    WebElement seconds = driver.findElement(By.id("billed-seconds"));
    wait.until(d -> Long.parseLong(seconds.getText()) >= 1);
    String before = cost.getText();
    long secondsBefore = Long.parseLong(seconds.getText());
    wait.until(d -> Long.parseLong(seconds.getText()) >= secondsBefore + 2);
    assertNotEquals(before, cost.getText(), "the cost ticked");
    assertTrue(micros(cost.getText()) > micros(before), before + " then " + cost.getText());
    wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("logs"), "console-line-3"));
    String logs = driver.findElement(By.id("logs")).getText();
    assertTrue(
        logs.indexOf("console-line-1") < logs.indexOf("console-line-2")
            && logs.indexOf("console-line-2") < logs.indexOf("console-line-3"),
        logs);
    assertEquals("tickmark ssh " + rentalId, driver.findElement(By.id("ssh-command")).getText());
    // what it runs, as launched from the form (the command through sh -c)
    assertEquals("ubuntu:24.04", driver.findElement(By.id("image")).getText());
    assertEquals(
        "[\"sh\",\"-c\",\"for i in 1 2 3; do echo console-line-$i; done; sleep 600\"]",
        driver.findElement(By.id("command")).getText());
    shot("rental");

    visit("#/rentals", "rentals");
    WebElement listed = driver.findElement(By.cssSelector(".cost[data-rental='" + rentalId + "']"));
    String listedBefore = listed.getText();
    wait.until(d -> !listed.getText().equals(listedBefore));
    shot("rentals");
  }

  @Test
  @Order(12)
  void stoppingEndsTheRentalAndTheLedgerShowsItsCapture() {
    visit("#/rentals/" + rentalId, "rental");
    wait.until(ExpectedConditions.textToBe(By.id("status"), "running"));
    assertTrue(driver.findElement(By.id("keep-snapshot")).isDisplayed());
    // what the stop button sends: the snapshot box's state (left unticked here)
    js(
        "window.sentBodies = []; const original = window.fetch;"
            + "window.fetch = (url, init) => {"
            + "  if (init && init.method === 'POST') window.sentBodies.push(url + ' ' + init.body);"
            + "  return original(url, init); };");
    driver.findElement(By.id("stop")).click();
    // the end arrives over the event stream
    wait.until(ExpectedConditions.textToBe(By.id("status"), "ended"));
    wait.until(ExpectedConditions.textToBe(By.id("end-reason"), "stopped_by_renter"));
    assertEquals(
        List.of("/v1/rentals/" + rentalId + "/stop {\"snapshot\":false}"),
        js("return window.sentBodies"));
    wait.until(
        ExpectedConditions.textToBePresentInElementLocated(By.id("logs"), "the rental ended"));
    shot("rental-ended");
    assertTrue(driver.findElements(By.id("refunded")).isEmpty(), "nothing refunded yet");

    // an operator refunds a µ€ of it: the rental's page says so, the ledger books it
    api.post(
            "/ops/rentals/" + rentalId + "/refunds",
            TestNodes.OPERATOR_TOKEN,
            "{\"reference\":\"console-1\",\"amount\":\"0.000001\",\"reason\":\"a test\"}")
        .expect(200);
    visit("#/rentals/" + rentalId, "rental");
    wait.until(ExpectedConditions.textToBe(By.id("refunded"), "€0.000001"));

    visit("#/ledger", "ledger");
    List<String> kinds =
        driver.findElements(By.cssSelector("#ledger .kind")).stream()
            .map(WebElement::getText)
            .toList();
    assertTrue(
        kinds.contains("deposit") && kinds.contains("capture") && kinds.contains("refund"),
        kinds.toString());
    shot("ledger");
  }

  @Test
  @Order(13)
  void theLedgerPagesThroughEntries() {
    for (int i = 0; i < 20; i++)
      api.opsDeposit(renter.id(), "1.00", "console-paging-" + i).expect(201);
    int total = api.ledger(renter.apiKey(), "?limit=500").get("entries").size();
    assertTrue(total > 20 && total <= 40, total + " entries");
    visit("#/ledger", "ledger");
    new Select(driver.findElement(By.name("limit"))).selectByValue("20");
    By rows = By.cssSelector("#ledger tbody tr");
    wait.until(ExpectedConditions.numberOfElementsToBe(rows, 20));
    String first = driver.findElement(rows).getText();
    driver.findElement(By.id("ledger-next")).click();
    wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("ledger"), "page 2"));
    assertEquals(total - 20, driver.findElements(rows).size());
    assertTrue(!driver.findElement(By.id("ledger-next")).isEnabled(), "the last page");
    shot("ledger-page-2");
    driver.findElement(By.id("ledger-prev")).click();
    wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("ledger"), "page 1"));
    assertEquals(first, driver.findElement(rows).getText(), "back to the first page");
    assertTrue(!driver.findElement(By.id("ledger-prev")).isEnabled(), "the first page");
  }

  @Test
  @Order(14)
  void keysPageMakesAnApiKeyShownOnce() {
    visit("#/keys", "keys");
    type("label", "ci");
    driver.findElement(By.cssSelector("#api-key-form button[type=submit]")).click();
    wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("new-api-key"), "tmk_"));
    shot("keys");
  }

  @Test
  @Order(15)
  void aRentalStoppedWithTheBoxTickedIsKeptAndListedAsASnapshot() {
    String kept =
        api.post(
                "/v1/rentals",
                renter.apiKey(),
                "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\""
                    + REGION
                    + "\",\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\","
                    + "\"command\":[\"sh\",\"-c\",\"echo kept > note.txt; sleep 3600\"]}")
            .expect(201)
            .json()
            .get("rental")
            .get("id")
            .asText();
    visit("#/rentals/" + kept, "rental");
    wait.until(ExpectedConditions.textToBe(By.id("status"), "running"));
    driver.findElement(By.id("keep-snapshot")).click();
    driver.findElement(By.id("stop")).click();
    wait.until(ExpectedConditions.textToBe(By.id("status"), "ended"));
    String snapshotId =
        api.get("/v1/rentals/" + kept, renter.apiKey()).json().get("snapshot_id").asText();
    assertTrue(snapshotId.startsWith("snap_"), "the stop kept the workspace: " + snapshotId);

    // the list is read when the page is drawn: visited again until the upload is done
    wait.until(
        d -> {
          visit("#/snapshots", "snapshots");
          String text = driver.findElement(By.id("view")).getText();
          return text.contains(snapshotId) && text.contains("ready");
        });
    shot("snapshots");

    // "Launch with it": the launch form with the snapshot chosen, and network where the host has it
    driver.findElement(By.linkText("Launch with " + snapshotId)).click();
    awaitPage("launch");
    assertEquals(
        snapshotId,
        new Select(driver.findElement(By.name("restore")))
            .getFirstSelectedOption()
            .getAttribute("value"));
    JsonNode hostRuntime =
        api.get("/v1/hosts/" + hostId, provider.apiKey()).expect(200).json().get("runtime");
    boolean network = hostRuntime.get("network").asBoolean();
    // the host's own runtime, where the form offers it (a machine without bubblewrap runs the
    // test's host as processes, which a renter is not offered)
    String runtime = hostRuntime.get("name").asText();
    boolean offered = runtime.equals("docker") || runtime.equals("sandbox");
    new Select(driver.findElement(By.name("region"))).selectByValue(REGION);
    type("command", "cat note.txt; sleep 600");
    if (network) driver.findElement(By.id("network")).click();
    if (offered) new Select(driver.findElement(By.name("runtime"))).selectByValue(runtime);
    js(
        "window.sentBodies = []; const original = window.fetch;"
            + "window.fetch = (url, init) => {"
            + "  if (init && init.method === 'POST') window.sentBodies.push(url + ' ' + init.body);"
            + "  return original(url, init); };");
    driver.findElement(By.cssSelector("#launch-form button[type=submit]")).click();
    wait.until(ExpectedConditions.urlMatches("#/rentals/rnt_[A-Za-z0-9]+$"));
    String restored = driver.getCurrentUrl().replaceAll(".*#/rentals/", "");
    awaitPage("rental");
    // the workspace it started with is the snapshot's
    wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("logs"), "kept"));
    @SuppressWarnings("unchecked")
    List<String> sent = (List<String>) js("return window.sentBodies");
    assertEquals(1, sent.size(), sent.toString());
    assertTrue(sent.get(0).contains("\"restore\":\"" + snapshotId + "\""), sent.get(0));
    assertEquals(network, sent.get(0).contains("\"network\":true"), sent.get(0));
    assertEquals(offered, sent.get(0).contains("\"runtime\":\"" + runtime + "\""), sent.get(0));
    assertEquals(
        runtime.equals("docker")
            ? runtime
            : runtime + " (the host's own system: the image is not used)",
        driver.findElement(By.id("runtime")).getText(),
        "what it runs in, asked for or not");
    api.post("/v1/rentals/" + restored + "/stop", renter.apiKey(), null).expect(202);
    wait.until(ExpectedConditions.textToBe(By.id("status"), "ended"));

    visit("#/snapshots", "snapshots");
    driver.findElement(By.xpath("//button[text()='Delete " + snapshotId + "']")).click();
    wait.until(
        d ->
            "deleted"
                .equals(
                    api.get("/v1/snapshots/" + snapshotId, renter.apiKey())
                        .json()
                        .get("status")
                        .asText()));
  }

  @Test
  @Order(16)
  void aWorkloadThatEndsByItselfShowsItsExitCodeLive() {
    String exited =
        api.post(
                "/v1/rentals",
                renter.apiKey(),
                "{\"gpu\":\"h100-80gb\",\"count\":1,\"region\":\""
                    + REGION
                    + "\",\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\","
                    + "\"command\":[\"sh\",\"-c\",\"sleep 5; exit 5\"]}")
            .expect(201)
            .json()
            .get("rental")
            .get("id")
            .asText();
    visit("#/rentals/" + exited, "rental");
    assertEquals("—", driver.findElement(By.id("exit-code")).getText(), "none while it runs");
    // the end arrives over the event stream, with the workload's exit status
    wait.until(ExpectedConditions.textToBe(By.id("end-reason"), "workload_exited"));
    wait.until(ExpectedConditions.textToBe(By.id("exit-code"), "5"));
    shot("rental-exited");
  }

  // ---- the provider

  @Test
  @Order(20)
  void aProviderEditsTheListingAndSeesItInThePublicOffers() {
    signIn(provider.apiKey());
    visit("#/hosts", "hosts");
    assertTrue(driver.findElement(By.id("view")).getText().contains("rack-7"));
    // the host's record, the matcher's tie-break, as the API gives it (the host read side may
    // still be counting the renter's rentals above: read both until they agree)
    wait.until(
        d -> {
          visit("#/hosts", "hosts");
          List<String> headers =
              d.findElements(By.cssSelector("#view table th")).stream()
                  .map(WebElement::getText)
                  .toList();
          int column = headers.indexOf("Rentals lost");
          if (column < 0) return false;
          JsonNode record = null;
          for (JsonNode h :
              api.get("/v1/hosts?limit=200", provider.apiKey()).expect(200).json().get("hosts"))
            if (h.get("id").asText().equals(hostId)) record = h;
          String cell =
              d.findElement(By.xpath("//table//tr[td//a[contains(@href, '" + hostId + "')]]"))
                  .findElements(By.tagName("td"))
                  .get(column)
                  .getText();
          return record != null
              && cell.equals(
                  record.get("rentals_lost").asLong()
                      + " of "
                      + record.get("rentals_ended").asLong());
        });
    driver.findElement(By.cssSelector("#registration-form button[type=submit]")).click();
    wait.until(
        ExpectedConditions.textToBePresentInElementLocated(
            By.id("install-command"),
            "sudo deploy/agent/install.sh --engine ws://127.0.0.1:"
                + node.httpPort()
                + " --token tmkreg_"));
    shot("hosts");

    visit("#/hosts/" + hostId, "host");
    String checks = driver.findElement(By.id("view")).getText();
    assertTrue(checks.contains("pass") && !checks.contains("fail"), checks);
    type("on_demand_price_per_gpu_hour", "2.19");
    type("spot_price_per_gpu_hour", "1.10");
    // windows over all of today and tomorrow (UTC) keep the host on the market, even across
    // midnight, while proving the windows are saved
    DayOfWeek today = ZonedDateTime.now(ZoneOffset.UTC).getDayOfWeek();
    for (DayOfWeek day : List.of(today, today.plus(1))) {
      driver.findElement(By.id("add-window")).click();
      String window = "#windows fieldset:last-child ";
      new Select(driver.findElement(By.cssSelector(window + "select[name=day]")))
          .selectByValue(day.name().substring(0, 3).toLowerCase(Locale.ROOT));
      js("document.querySelector('" + window + "input[name=start]').value = '00:00'");
      type(By.cssSelector(window + "input[name=end]"), "24:00");
    }
    driver.findElement(By.id("save-listing")).click();
    wait.until(ExpectedConditions.textToBe(By.id("listing-saved"), "Listing saved."));
    shot("host");
    JsonNode listing =
        api.get("/v1/hosts/" + hostId, provider.apiKey()).expect(200).json().get("listing");
    assertEquals("2.190000", listing.get("on_demand_price_per_gpu_hour").asText());
    assertEquals(2, listing.get("availability").size(), listing.toString());
    visit("#/hosts/" + hostId, "host");
    assertEquals(2, driver.findElements(By.cssSelector("#windows fieldset")).size(), "reloaded");
    assertEquals(
        "2.190000",
        driver.findElement(By.name("on_demand_price_per_gpu_hour")).getAttribute("value"));

    // the public offers catch up (the host read side) without a key
    wait.until(
        d -> {
          visit("#/offers", "offers");
          String text = d.findElement(By.id("offers")).getText();
          return text.contains("€2.190000") && text.contains("€1.100000");
        });
  }

  @Test
  @Order(21)
  void aProviderChecksAgainAndSeesTheNewVerdict() {
    signIn(provider.apiKey());
    visit("#/hosts/" + hostId, "host");
    String before = driver.findElement(By.id("last-verified")).getText();
    assertTrue(before.endsWith(" UTC"), before);
    driver.findElement(By.id("check-again")).click();
    // The page redraws with the new report's breakdown once the agent has measured again.
    wait.until(
        d -> {
          java.util.List<WebElement> shown = d.findElements(By.id("last-verified"));
          return !shown.isEmpty() && !shown.get(0).getText().equals(before);
        });
    awaitPage("host");
    assertEquals("verified", driver.findElement(By.id("host-status")).getText());
    JsonNode host = api.get("/v1/hosts/" + hostId, provider.apiKey()).expect(200).json();
    assertTrue(host.get("verification_requested_at").isNull(), host.toString());
    String checks = driver.findElement(By.id("view")).getText();
    assertTrue(checks.contains("disk_write") && !checks.contains("fail"), checks);
    // how the agent runs rentals, as its report said
    JsonNode runtime = host.get("runtime");
    String shownRuntime = driver.findElement(By.id("host-runtime")).getText();
    assertEquals(
        runtime.get("name").asText()
            + (runtime.get("network").asBoolean()
                ? ", rentals with network run here"
                : ", no network for rentals: those that ask for it go to other hosts"
                    + (runtime.get("name").asText().equals("sandbox")
                        ? " (a sandbox needs slirp4netns)"
                        : "")),
        shownRuntime,
        host.toString());
    assertNoScriptErrors();
    shot("host-check-again");

    // the rentals the renter's tests ran here, and what they earned: as the API and the provider's
    // account say (this provider's only host; no payout has run yet)
    JsonNode[] ran = new JsonNode[1];
    wait.until(
        d -> {
          ran[0] =
              api.get("/v1/hosts/" + hostId + "/rentals?limit=50", provider.apiKey())
                  .expect(200)
                  .json();
          visit("#/hosts/" + hostId, "host");
          JsonNode totals = ran[0].get("totals");
          return totals.get("rentals").asLong() >= 3
              && totals
                  .get("earned")
                  .asText()
                  .equals(api.account(provider.apiKey()).get("earnings").asText())
              && d.findElement(By.id("host-earned"))
                  .getText()
                  .startsWith(
                      totals.get("rentals").asLong()
                          + " rentals, "
                          + totals.get("card_seconds").asLong()
                          + " card-seconds billed, earned €"
                          + totals.get("earned").asText()
                          + ".");
        });
    String rows = driver.findElement(By.id("host-rentals")).getText();
    for (JsonNode r : ran[0].get("rentals"))
      assertTrue(
          rows.contains(r.get("id").asText()) && rows.contains("€" + r.get("earned").asText()),
          r + " in " + rows);
    assertNoScriptErrors();
  }

  // ---- the operator

  @Test
  @Order(30)
  void theOperatorSeesTheAuditConservedAndEvictsAndReinstatesAHost() {
    visit("#/sign-in", "sign-in");
    type("operator_token", TestNodes.OPERATOR_TOKEN);
    driver.findElement(By.cssSelector("#operator-form button[type=submit]")).click();
    awaitPage("ops");
    WebElement conserved = driver.findElement(By.id("conserved"));
    assertTrue(conserved.getText().startsWith("Conserved"), conserved.getText());
    shot("ops-audit");

    visit("#/ops/hosts", "ops-hosts");
    shot("ops-hosts-queue");
    new Select(driver.findElement(By.name("status"))).selectByValue("verified");
    awaitPage("ops-hosts");
    // the operator sees how each host runs rentals
    JsonNode runtime =
        api.get("/v1/hosts/" + hostId, provider.apiKey()).expect(200).json().get("runtime");
    String row = driver.findElement(By.xpath("//tr[td[.='" + hostId + "']]")).getText();
    assertTrue(
        row.contains(
            runtime.get("name").asText()
                + (runtime.get("network").asBoolean() ? " " : ", no network ")),
        row);
    // what ran on the host, with who rented it: the host's id leads there
    driver.findElement(By.linkText(hostId)).click();
    awaitPage("ops-host-rentals");
    JsonNode ran =
        api.get("/ops/hosts/" + hostId + "/rentals?limit=200", TestNodes.OPERATOR_TOKEN)
            .expect(200)
            .json();
    assertTrue(ran.get("rentals").size() > 0, ran.toString());
    JsonNode totals = ran.get("totals");
    assertEquals(
        totals.get("rentals").asLong()
            + (totals.get("rentals").asLong() == 1 ? " rental, " : " rentals, ")
            + totals.get("card_seconds").asLong()
            + " card-seconds billed, earned the provider €"
            + totals.get("earned").asText()
            + ".",
        driver.findElement(By.id("ops-host-earned")).getText());
    String rentalRows = driver.findElement(By.id("ops-host-rentals")).getText();
    for (JsonNode r : ran.get("rentals"))
      assertTrue(
          rentalRows
              .lines()
              .anyMatch(
                  l ->
                      l.contains(r.get("rental").get("id").asText())
                          && l.contains(r.get("renter_id").asText())
                          && l.contains("€" + r.get("rental").get("earned").asText())),
          r + " in " + rentalRows);
    shot("ops-host-rentals");
    // a dispute settled from here: another µ€ of the ended rental refunded (one was, earlier), and
    // more than is left refused with the engine's code
    type("refund-rental", rentalId);
    type("refund-reference", "console-2");
    type("refund-amount", "0.000001");
    type("refund-reason", "console test");
    driver.findElement(By.cssSelector("#refund-form button[type=submit]")).click();
    wait.until(
        ExpectedConditions.textToBePresentInElementLocated(
            By.id("refund-result"), "Refunded €0.000001 of " + rentalId + " to " + renter.id()));
    assertTrue(
        driver.findElement(By.id("refund-result")).getText().contains(": €0.000002 of €"),
        driver.findElement(By.id("refund-result")).getText());
    type("refund-reference", "console-3");
    type("refund-amount", "1000");
    driver.findElement(By.cssSelector("#refund-form button[type=submit]")).click();
    wait.until(
        ExpectedConditions.textToBePresentInElementLocated(
            By.id("refund-error"), "(refund_exceeds_charge)"));
    visit("#/ops/hosts", "ops-hosts");
    type(By.cssSelector("form.inline input[name=reason]"), "console test");
    driver.findElement(By.xpath("//button[text()='Evict " + hostId + "']")).click();
    By status = By.cssSelector(".host-status[data-host='" + hostId + "']");
    wait.until(ExpectedConditions.textToBe(status, "evicted"));
    assertEquals(
        "evicted",
        api.get("/ops/hosts/" + hostId, TestNodes.OPERATOR_TOKEN).json().get("status").asText());
    // the list is a read side: the evicted host shows under "evicted" once it caught up
    new Select(driver.findElement(By.name("status"))).selectByValue("evicted");
    By reinstate = By.xpath("//button[text()='Reinstate " + hostId + "']");
    wait.until(
        d -> {
          visit("#/ops/hosts", "ops-hosts");
          return !d.findElements(reinstate).isEmpty();
        });
    driver.findElement(reinstate).click();
    wait.until(ExpectedConditions.textToBe(status, "verified"));
    assertEquals(
        "verified",
        api.get("/ops/hosts/" + hostId, TestNodes.OPERATOR_TOKEN).json().get("status").asText());
    shot("ops-hosts");

    visit("#/ops/payouts", "ops-payouts");
    type("minimum", "10.00");
    driver.findElement(By.cssSelector("#payout-form button[type=submit]")).click();
    wait.until(
        ExpectedConditions.textToBePresentInElementLocated(By.id("payout-result"), "completed"));
    shot("ops-payouts");
    // the form for a payout the bank returned reaches the run: this run paid the provider nothing
    // (it earned less than the minimum), which the engine says with its code
    JsonNode[] runs = new JsonNode[1];
    wait.until( // the list is a read side: the run appears within moments
        d ->
            (runs[0] =
                        api.get("/ops/payouts?limit=1", TestNodes.OPERATOR_TOKEN)
                            .expect(200)
                            .json()
                            .get("runs"))
                    .size()
                > 0);
    String runId = runs[0].get(0).get("id").asText();
    type("return-run", runId);
    type("return-account", provider.id());
    type("return-reason", "AC04");
    driver.findElement(By.cssSelector("#payout-return-form button[type=submit]")).click();
    wait.until(
        ExpectedConditions.textToBePresentInElementLocated(
            By.id("payout-return-error"), "pays nothing to account " + provider.id()));
    assertTrue(
        driver.findElement(By.id("payout-return-error")).getText().endsWith("(not_found)"),
        driver.findElement(By.id("payout-return-error")).getText());
    assertNoScriptErrors();
  }

  @Test
  @Order(40)
  void everyPageIsLabelledReachableAndErrorFree() {
    for (String[] page :
        new String[][] {
          {"#/offers", "offers"},
          {"#/cookbook", "cookbook"},
          {"#/job-cost", "job-cost"},
          {"#/earnings", "earnings"},
          {"#/sign-in", "sign-in"},
          {"#/account", "account"},
          {"#/launch", "launch"},
          {"#/rentals", "rentals"},
          {"#/rentals/" + rentalId, "rental"},
          {"#/ledger", "ledger"},
          {"#/snapshots", "snapshots"},
          {"#/keys", "keys"},
          {"#/hosts", "hosts"},
          {"#/hosts/" + hostId, "host"},
          {"#/ops", "ops"},
          {"#/ops/hosts", "ops-hosts"},
          {"#/ops/hosts/" + hostId + "/rentals", "ops-host-rentals"},
          {"#/ops/payouts", "ops-payouts"},
          {"#/no-such-page", "not-found"}
        }) {
      visit(page[0], page[1]);
      assertNoScriptErrors();
    }
    // a problem+json answer is shown with its detail and code
    visit("#/sign-in", "sign-in");
    type("api_key", "tmk_nosuchkey_0000");
    driver.findElement(By.cssSelector("#sign-in-form button[type=submit]")).click();
    wait.until(
        ExpectedConditions.textToBePresentInElementLocated(
            By.cssSelector("#view .error"), "(unauthorized)"));
    shot("sign-in-error");

    // signing up shows the new key once and signs the tab in with it
    type("name", "Console newcomer");
    driver.findElement(By.cssSelector("#sign-up-form button[type=submit]")).click();
    wait.until(ExpectedConditions.textToBePresentInElementLocated(By.id("new-key"), "tmk_"));
    String key = driver.findElement(By.cssSelector("#new-key pre")).getText();
    assertEquals(key, js("return sessionStorage.getItem('tickmark.apiKey')"));
    shot("sign-up");
    visit("#/account", "account");
    assertEquals("€0.000000", driver.findElement(By.id("balance")).getText());
  }

  // ---- helpers

  /** Opens a console route and waits until the page has drawn; checks labels and tab reach. */
  static void visit(String hash, String page) {
    String url = node.baseUrl() + "/" + hash;
    if (driver.getCurrentUrl().equals(url)) driver.navigate().refresh();
    else driver.get(url);
    awaitPage(page);
    assertEveryControlLabelledAndFocusable(hash);
    String text = driver.findElement(By.id("view")).getText();
    assertTrue(
        !java.util.regex.Pattern.compile("\\bnull\\b|\\bundefined\\b|\\bNaN\\b|\\[object ")
            .matcher(text)
            .find(),
        hash + " shows a value that is not one: " + text);
  }

  static void awaitPage(String page) {
    wait.until(
        ExpectedConditions.presenceOfElementLocated(
            By.cssSelector("#view[data-page='" + page + "'][data-ready='true']")));
  }

  static void signIn(String key) {
    visit("#/sign-in", "sign-in");
    type("api_key", key);
    driver.findElement(By.cssSelector("#sign-in-form button[type=submit]")).click();
    awaitPage("account");
  }

  static void type(String name, String text) {
    type(By.name(name), text);
  }

  static void type(By by, String text) {
    WebElement el = driver.findElement(by);
    el.clear();
    el.sendKeys(text);
  }

  static Object js(String script) {
    return ((JavascriptExecutor) driver).executeScript(script);
  }

  static void shot(String name) {
    try {
      Files.write(SHOTS.resolve(name + ".png"), driver.getScreenshotAs(OutputType.BYTES));
    } catch (java.io.IOException e) {
      throw new AssertionError("screenshot " + name, e);
    }
  }

  static long micros(String euros) {
    return new BigDecimal(euros.replace("€", "")).movePointRight(6).longValueExact();
  }

  /** Every input, select and textarea has a label with text; no control is out of tab order. */
  static void assertEveryControlLabelledAndFocusable(String where) {
    @SuppressWarnings("unchecked")
    List<Object> problems =
        (List<Object>)
            js(
                "const bad = [];"
                    + "for (const el of document.querySelectorAll('input, select, textarea')) {"
                    + "  if (el.type === 'hidden') continue;"
                    + "  const text = [...(el.labels ?? [])].map(l => l.textContent.trim()).join('')"
                    + "    || el.getAttribute('aria-label') || '';"
                    + "  if (!text) bad.push('unlabelled ' + el.outerHTML.slice(0, 120));"
                    + "  if (el.tabIndex < 0) bad.push('not in tab order ' + el.outerHTML.slice(0, 120));"
                    + "}"
                    + "for (const el of document.querySelectorAll('button, a[href]'))"
                    + "  if (el.tabIndex < 0 || !el.textContent.trim()) bad.push('unreachable or"
                    + " nameless ' + el.outerHTML.slice(0, 120));"
                    + "return bad;");
    assertEquals(List.of(), problems, where);
  }

  /** Tab from the form's first control visits every control of the form, in order. */
  static void assertFormReachableByTab(String formId) {
    @SuppressWarnings("unchecked")
    List<Object> controls =
        (List<Object>)
            js(
                "return [...document.getElementById('"
                    + formId
                    + "').querySelectorAll('input, select, textarea, button')]"
                    + ".map((el, i) => el.id || (el.id = 'tab-' + i));");
    js("document.getElementById('" + controls.get(0) + "').focus()");
    List<Object> visited = new ArrayList<>();
    visited.add(js("return document.activeElement.id"));
    for (int i = 1; i < controls.size(); i++) {
      driver.switchTo().activeElement().sendKeys(Keys.TAB);
      visited.add(js("return document.activeElement.id"));
    }
    assertEquals(controls, visited, "tab order of " + formId);
  }

  /** No error, rejection or CSP violation the page recorded, nor any in the browser's log. */
  static void assertNoScriptErrors() {
    Object recorded = js("return window.tickmarkErrors ?? ['the console script never ran']");
    assertEquals(List.of(), recorded, "script errors on " + driver.getCurrentUrl());
    List<String> severe = new ArrayList<>();
    for (LogEntry e : driver.manage().logs().get(LogType.BROWSER)) {
      // a 4xx the page asked for and showed (a wrong key) is the API answering, not a script error
      boolean expectedHttp =
          e.getMessage()
              .contains("Failed to load resource: the server responded with a status of 4");
      if (e.getLevel().intValue() >= Level.SEVERE.intValue() && !expectedHttp)
        severe.add(e.getMessage());
    }
    assertEquals(List.of(), severe, "browser log of " + driver.getCurrentUrl());
  }
}
