package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.persistence.TestDatabase;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The console as HTTP: served at {@code /} by a real node with its security headers and content
 * types, conditional requests, and nothing of the classpath beyond the console's own files.
 */
class ConsoleHttpIntegrationTest {
  static Node node;
  static ApiClient api;

  @BeforeAll
  static void start() throws Exception {
    node = Node.start(TestNodes.settings(TestDatabase.fresh("console_http")));
    api = new ApiClient(node.baseUrl());
  }

  @AfterAll
  static void stop() throws Exception {
    if (node != null) node.close();
  }

  @Test
  void theRootIsTheConsolePageUnderAStrictContentSecurityPolicy() {
    ApiClient.Reply page = api.get("/", null).expect(200);
    assertEquals("text/html; charset=UTF-8", page.contentType());
    assertTrue(page.body().contains("<script type=\"module\" src=\"/console/app.js\">"));
    assertTrue(!page.body().contains("<script>") && !page.body().contains("style="), "no inline");
    String csp = page.header("Content-Security-Policy");
    assertNotNull(csp);
    for (String directive :
        new String[] {
          "default-src 'self'",
          "script-src 'self'",
          "style-src 'self'",
          "connect-src 'self'",
          "frame-ancestors 'none'",
          "object-src 'none'"
        }) assertTrue(csp.contains(directive), csp + " lacks " + directive);
    assertTrue(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), csp);
    assertEquals("nosniff", page.header("X-Content-Type-Options"));
    assertEquals("no-referrer", page.header("Referrer-Policy"));
    assertEquals("DENY", page.header("X-Frame-Options"));
    assertEquals("no-cache", page.header("Cache-Control"));
    assertNull(page.header("Set-Cookie"), "the console sets no cookie");
  }

  @Test
  void scriptsStylesAndDataGoOutWithTheirTypes() {
    Map<String, String> types =
        Map.of(
            "/console/app.js", "text/javascript; charset=UTF-8",
            "/console/estimator.js", "text/javascript; charset=UTF-8",
            "/console/pages/renter.js", "text/javascript; charset=UTF-8",
            "/console/console.css", "text/css; charset=UTF-8",
            "/console/cookbook.json", "application/json",
            "/console/favicon.svg", "image/svg+xml");
    types.forEach(
        (path, type) -> {
          ApiClient.Reply r = api.get(path, null).expect(200);
          assertEquals(type, r.contentType(), path);
          assertEquals("nosniff", r.header("X-Content-Type-Options"), path);
          assertNotNull(r.header("Content-Security-Policy"), path);
        });
  }

  @Test
  void anUnchangedFileIsRevalidatedNotResent() {
    ApiClient.Reply first = api.get("/console/app.js", null).expect(200);
    String etag = first.header("ETag");
    assertNotNull(etag, "an ETag to revalidate with");
    ApiClient.Reply again =
        api.send("GET", "/console/app.js", null, null, Map.of("If-None-Match", etag));
    assertEquals(304, again.status());
  }

  @Test
  void onlyTheConsolesOwnFilesAreServed() {
    for (String path :
        new String[] {
          "/console/nothing.js",
          "/console/../tickmark.conf",
          "/console/%2e%2e/tickmark.conf",
          "/console/..%2ftickmark.conf",
          "/console/Index.HTML",
          "/console/",
          "/console/dev/tickmark/console/Cookbook.class",
          "/nothing-here"
        }) {
      ApiClient.Reply r = api.get(path, null);
      assertEquals(404, r.status(), path + ": " + r.body());
    }
    assertEquals(405, api.post("/", null, "{}").status(), "the console is read only");
    // the API is untouched by the console's routes
    api.get("/health", null).expect(200);
    api.get("/v1/catalog/gpus", null).expect(200);
  }
}
