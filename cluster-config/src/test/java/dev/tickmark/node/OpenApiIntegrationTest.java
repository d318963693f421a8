package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.tickmark.http.HttpApi;
import dev.tickmark.http.OpenApiRoutes;
import dev.tickmark.http.Operation;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link HttpApi#OPERATIONS} (which OpenApiDocumentTest holds to {@code /v1/openapi.json}) against
 * the routes a real node serves, both ways: every listed operation reaches a route, and every other
 * method on a listed path, and paths beside the listed ones, get the router's own answer (404
 * {@code no_such_route} or 405 {@code method_not_allowed}). The problems each operation answers to
 * made-up ids and bad bodies are ones the document lists for it, and what the node answers to real
 * requests matches the document's schemas.
 */
class OpenApiIntegrationTest {
  static final List<String> METHODS = List.of("GET", "POST", "PUT", "DELETE", "PATCH");

  static Node node;
  static ApiClient api;
  static ApiClient.Customer customer;
  static HostTestSupport.Registered host;
  static JsonNode doc;

  @BeforeAll
  static void start() throws Exception {
    node = HostTestSupport.startNode("openapi");
    api = new ApiClient(node.baseUrl());
    customer = api.signUp("Drift");
    // a real host credential, so the agent's routes get past their authentication to the router
    host = HostTestSupport.register(node, api, customer, "eu-nl");
    try (InputStream in =
        OpenApiIntegrationTest.class.getClassLoader().getResourceAsStream(OpenApiRoutes.RESOURCE)) {
      doc = ApiClient.JSON.readTree(in);
    }
  }

  @AfterAll
  static void stop() throws Exception {
    if (host != null) host.agent().close();
    if (node != null) node.close();
  }

  @Test
  void everyListedOperationReachesARoute() {
    List<String> unrouted = new ArrayList<>();
    List<String> failed = new ArrayList<>();
    List<String> undocumented = new ArrayList<>();
    for (Operation op : HttpApi.OPERATIONS) {
      for (boolean withBody : new boolean[] {false, true}) {
        ApiClient.Reply reply = send(op.method(), sample(op.path()), withBody);
        String seen = op + (withBody ? " {}" : "") + " → " + reply.status() + " " + reply.body();
        if (routerAnswer(reply)) unrouted.add(seen);
        // made-up ids and a bad body are a client's mistake: a listed 4xx, never a 500
        if (reply.status() == 500) {
          failed.add(seen);
        } else if (reply.status() >= 400 && !documentedProblem(op, reply)) {
          undocumented.add(seen);
        } else if (reply.status() >= 400) {
          List<String> errors = new ArrayList<>();
          check(doc.at("/components/schemas/Problem"), reply.json(), "$", errors);
          if (!errors.isEmpty()) undocumented.add(seen + " " + errors);
        }
      }
    }
    assertEquals(List.of(), unrouted, "listed, but the node has no route for them");
    assertEquals(List.of(), failed, "answered 500 internal");
    assertEquals(List.of(), undocumented, "answered a problem openapi.json does not list for it");
  }

  @Test
  void everyOtherMethodOnAListedPathIsNoRoute() {
    Map<String, Set<String>> methods = new LinkedHashMap<>();
    for (Operation op : HttpApi.OPERATIONS)
      methods.computeIfAbsent(op.path(), p -> new TreeSet<>()).add(op.method());
    List<String> served = new ArrayList<>();
    methods.forEach(
        (path, listed) -> {
          for (String method : METHODS) {
            // GET /v1/hosts/registration-tokens is GET /v1/hosts/{id} with a malformed id
            if (listed.contains(method) || documented(method, sample(path))) continue;
            ApiClient.Reply reply = send(method, sample(path));
            if (!routerAnswer(reply) && !malformedIdAnswer(sample(path), reply))
              served.add(method + " " + path + " → " + reply.status() + " " + reply.body());
          }
        });
    assertEquals(List.of(), served, "served, but not listed (nor in openapi.json)");
  }

  @Test
  void pathsBesideTheListedOnesAreNoRoute() {
    Set<String> paths = new TreeSet<>();
    for (Operation op : HttpApi.OPERATIONS) {
      // the console answers its own 404 for any name under /console/, so nothing grows below it
      if (op.path().equals("/") || op.path().startsWith("/console/")) continue;
      paths.add(sample(op.path()) + "/nope");
    }
    paths.addAll(
        List.of(
            "/v1/nope",
            "/v2/rentals",
            "/ops/nope",
            "/v1/catalog/nope",
            "/v1/agent/nope",
            "/v1/openapi.yaml",
            "/ops/ledger/nope",
            "/nope"));
    // /v1/hosts/nope is /v1/hosts/{id}: what a listed path answers the other tests check
    paths.removeIf(p -> HttpApi.OPERATIONS.stream().anyMatch(op -> matches(op.path(), p)));
    List<String> served = new ArrayList<>();
    for (String path : paths) {
      ApiClient.Reply reply = send("GET", path);
      boolean noRoute = reply.status() == 404 && "no_such_route".equals(reply.text("code"));
      if (!noRoute && !malformedIdAnswer(path, reply))
        served.add("GET " + path + " → " + reply.status() + " " + reply.body());
    }
    assertEquals(List.of(), served, "served, but not listed (nor in openapi.json)");
  }

  @Test
  void theDocumentIsServedWithoutAuthAndMayBeCached() {
    ApiClient.Reply reply = api.get("/v1/openapi.json", null).expect(200);
    assertEquals("application/json", reply.contentType());
    assertTrue(reply.header("Cache-Control").contains("max-age"), reply.header("Cache-Control"));
    assertEquals(doc, reply.json(), "the node serves the document of its jar");
    String etag = reply.header("ETag");
    assertTrue(etag != null && !etag.isEmpty(), "no ETag");
    api.send("GET", "/v1/openapi.json", null, null, Map.of("If-None-Match", etag)).expect(304);
  }

  @Test
  void whatTheNodeAnswersMatchesTheSchemas() {
    String key = customer.apiKey();
    String op = TestNodes.OPERATOR_TOKEN;
    ApiClient.Customer renter = RentingSupport.renter(api, "Schema", "50");
    conforms("SignUpResult", api.post("/v1/accounts", null, "{\"name\":\"Ada\"}").expect(201));
    conforms("Account", api.get("/v1/account", renter.apiKey()).expect(200));
    conforms("LedgerPage", api.get("/v1/account/ledger", renter.apiKey()).expect(200));
    conforms("OpsAccount", api.get("/ops/accounts/" + renter.id(), op).expect(200));
    conforms("LedgerAudit", api.get("/ops/ledger/audit", op).expect(200));
    conforms("GpuList", api.get("/v1/catalog/gpus", null).expect(200));
    conforms("RegionList", api.get("/v1/catalog/regions", null).expect(200));
    conforms("OfferList", api.get("/v1/offers", null).expect(200));
    conforms("Host", api.get("/v1/hosts/" + host.hostId(), key).expect(200));
    conforms("Host", api.get("/ops/hosts/" + host.hostId(), op).expect(200));
    conforms("HostPage", api.get("/v1/hosts", key).expect(200));
    conforms(
        "RegistrationToken",
        api.post("/v1/hosts/registration-tokens", key, "{\"region\":\"eu-nl\"}").expect(201));
    // nothing is listed, so the rental waits (pending) and is then stopped
    String body =
        "{\"gpu\":\"h100-80gb\",\"max_price_per_gpu_hour\":\"3.00\",\"image\":\"ubuntu:24.04\","
            + "\"wait_seconds\":0}";
    JsonNode launched = conforms("RentalEnvelope", api.post("/v1/rentals", renter.apiKey(), body));
    String rental = launched.get("rental").get("id").asText();
    conforms("Rental", api.get("/v1/rentals/" + rental, renter.apiKey()).expect(200));
    conforms("Usage", api.get("/v1/rentals/" + rental + "/usage", renter.apiKey()).expect(200));
    conforms("RentalPage", api.get("/v1/rentals", renter.apiKey()).expect(200));
    conforms(
        "RentalEnvelope",
        api.post("/v1/rentals/" + rental + "/stop", renter.apiKey(), "{}").expect(202));
    conforms("SnapshotPage", api.get("/v1/snapshots", renter.apiKey()).expect(200));
    conforms("LogPage", api.get("/v1/rentals/" + rental + "/logs", renter.apiKey()).expect(200));
    conforms(
        "Account",
        api.put("/v1/account/spend-cap", renter.apiKey(), "{\"monthly\":\"100\"}").expect(200));
    conforms(
        "Account",
        api.put(
                "/v1/account/payout-details",
                renter.apiKey(),
                "{\"holder_name\":\"Ada Lovelace\",\"iban\":\"DE89370400440532013000\"}")
            .expect(200));
    conforms("AuditTrail", api.get("/v1/account/audit", renter.apiKey()).expect(200));
    conforms("CreatedApiKey", api.post("/v1/account/api-keys", renter.apiKey(), "{}").expect(201));
    conforms("ApiKeyList", api.get("/v1/account/api-keys", renter.apiKey()).expect(200));
    String sshKey = "{\"name\":\"laptop\",\"public_key\":\"" + ed25519Line() + " ada@laptop\"}";
    conforms("SshKey", api.post("/v1/account/ssh-keys", renter.apiKey(), sshKey).expect(201));
    conforms("SshKeyList", api.get("/v1/account/ssh-keys", renter.apiKey()).expect(200));
    conforms(
        "PaymentReceipt",
        api.webhook(ApiClient.paymentBody("pay_schema", renter.id(), "5.00", "EUR", "succeeded"))
            .expect(200));
    conforms("Deposit", api.opsDeposit(renter.id(), "1.50", "schema-1").expect(201));
    conforms(
        "OpsAccount", api.post("/ops/accounts/" + renter.id() + "/suspend", op, "{}").expect(200));
    conforms(
        "OpsAccount", api.post("/ops/accounts/" + renter.id() + "/resume", op, null).expect(200));
    conforms("HostPage", api.get("/ops/hosts", op).expect(200));
    ApiClient.Reply run =
        api.send(
            "POST",
            "/ops/payouts",
            op,
            "{\"minimum\":\"10.00\"}",
            Map.of("Idempotency-Key", "schema-run"));
    String runId = conforms("PayoutRun", run.expect(201)).get("id").asText();
    conforms("PayoutRun", api.get("/ops/payouts/" + runId, op).expect(200));
    conforms("PayoutRunList", api.get("/ops/payouts", op).expect(200));
    conforms(
        "Host",
        api.put(
                "/v1/hosts/" + host.hostId() + "/listing",
                key,
                "{\"on_demand_price_per_gpu_hour\":\"2.10\",\"listed\":true,"
                    + "\"availability\":[{\"day\":\"mon\",\"start\":\"08:00\",\"end\":\"18:00\"}]}")
            .expect(200));
    conforms("Problem", api.get("/v1/rentals/rnt_000000000000000000000000", key).expect(404));
  }

  /** An OpenSSH ssh-ed25519 public key (type and base64 blob): its 32 bytes need not be a key. */
  static String ed25519Line() {
    java.io.ByteArrayOutputStream blob = new java.io.ByteArrayOutputStream();
    byte[] type = "ssh-ed25519".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    byte[] point = new byte[32];
    point[0] = 7;
    for (byte[] part : new byte[][] {type, point}) {
      blob.writeBytes(java.nio.ByteBuffer.allocate(4).putInt(part.length).array());
      blob.writeBytes(part);
    }
    return "ssh-ed25519 " + java.util.Base64.getEncoder().encodeToString(blob.toByteArray());
  }

  // ---- requests

  /** A path of the template with made-up ids of the right shape (so they pass the edge checks). */
  static String sample(String template) {
    Matcher m = Pattern.compile("\\{([a-z_0-9]+)}").matcher(template);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      String before = template.substring(0, m.start());
      m.appendReplacement(out, Matcher.quoteReplacement(sampleId(m.group(1), before)));
    }
    m.appendTail(out);
    return out.toString();
  }

  private static String sampleId(String name, String before) {
    String hex24 = "00000000000000000000dead";
    if (name.equals("sha256")) return "ab".repeat(32);
    if (name.equals("stream_id")) return "str_" + hex24;
    if (name.equals("file")) return "app.js";
    if (name.equals("sid") || before.endsWith("/snapshots/")) return "snap_" + hex24;
    if (name.equals("rid") || before.endsWith("/rentals/")) return "rnt_" + hex24;
    if (before.endsWith("/hosts/")) return "host_" + hex24;
    if (before.endsWith("/accounts/")) return "acc_" + hex24;
    return "nope";
  }

  /**
   * The documented answer of a path with a malformed id where a listed path has its {@code {id}}
   * ({@code /v1/hosts/registration-tokens} under {@code /v1/hosts/{id}}): the id is checked at the
   * edge, before any route below it, so every method and sub-path answers 404 {@code not_found}.
   */
  static boolean malformedIdAnswer(String path, ApiClient.Reply reply) {
    if (reply.status() != 404 || !"not_found".equals(reply.text("code"))) return false;
    String[] p = path.split("/");
    for (Operation op : HttpApi.OPERATIONS) {
      String[] t = op.path().split("/");
      for (int k = 1; k < Math.min(t.length, p.length); k++) {
        boolean param = t[k].startsWith("{");
        if (!param && !t[k].equals(p[k])) break;
        if (param && !t[k].equals("{sha256}") && !p[k].matches("[a-z]+_[0-9a-f]{24}")) return true;
      }
    }
    return false;
  }

  /** Whether {@code path} is an instance of the template ({@code {x}} is one segment). */
  static boolean matches(String template, String path) {
    return path.matches(template.replace(".", "\\.").replaceAll("\\{[a-z_0-9]+}", "[^/]+"));
  }

  static boolean documented(String method, String path) {
    return HttpApi.OPERATIONS.stream()
        .anyMatch(op -> op.method().equals(method) && matches(op.path(), path));
  }

  /** With the credential its part of the API takes, and a body that is no valid request. */
  static ApiClient.Reply send(String method, String path) {
    return send(method, path, true);
  }

  static ApiClient.Reply send(String method, String path, boolean withBody) {
    String bearer =
        path.startsWith("/ops/")
            ? TestNodes.OPERATOR_TOKEN
            : path.startsWith("/v1/agent/") ? host.credential() : customer.apiKey();
    boolean takesBody = method.equals("POST") || method.equals("PUT") || method.equals("PATCH");
    String body = withBody && takesBody ? "{}" : null;
    return api.send(method, path, bearer, body, Map.of());
  }

  /** Whether the document lists this answer's status and code for the operation. */
  static boolean documentedProblem(Operation op, ApiClient.Reply reply) {
    if (reply.contentType() == null || !reply.contentType().startsWith("application/problem+json"))
      return false;
    JsonNode codes =
        doc.path("paths")
            .path(op.path())
            .path(op.method().toLowerCase(java.util.Locale.ROOT))
            .path("responses")
            .path(Integer.toString(reply.status()))
            .path("x-problem-codes");
    for (JsonNode code : codes) if (code.asText().equals(reply.text("code"))) return true;
    return false;
  }

  /** What the router answers when no route took the request. */
  static boolean routerAnswer(ApiClient.Reply reply) {
    boolean problem =
        reply.contentType() != null && reply.contentType().startsWith("application/problem+json");
    if (!problem) return false;
    String code = reply.text("code");
    return (reply.status() == 404 && "no_such_route".equals(code))
        || (reply.status() == 405 && "method_not_allowed".equals(code));
  }

  // ---- a small JSON Schema check: the keywords the document uses

  JsonNode conforms(String schema, ApiClient.Reply reply) {
    assertTrue(reply.status() < 500, reply.body());
    JsonNode value = reply.json();
    List<String> errors = new ArrayList<>();
    check(doc.at("/components/schemas/" + schema), value, "$", errors);
    assertEquals(List.of(), errors, schema + ": " + value);
    return value;
  }

  static void check(JsonNode schema, JsonNode value, String at, List<String> errors) {
    assertFalse(schema.isMissingNode(), at + ": no such schema");
    if (schema.has("$ref")) {
      check(doc.at(schema.get("$ref").asText().substring(1)), value, at, errors);
      return;
    }
    if (schema.has("anyOf")) {
      for (JsonNode option : schema.get("anyOf")) {
        List<String> mine = new ArrayList<>();
        check(option, value, at, mine);
        if (mine.isEmpty()) return;
      }
      errors.add(at + ": matches none of " + schema.get("anyOf"));
      return;
    }
    if (schema.has("type")) {
      Set<String> types = new TreeSet<>();
      if (schema.get("type").isArray()) schema.get("type").forEach(t -> types.add(t.asText()));
      else types.add(schema.get("type").asText());
      if (!types.contains(typeOf(value))
          && !(types.contains("number") && typeOf(value).equals("integer"))) {
        errors.add(at + ": " + typeOf(value) + " is not " + types);
        return;
      }
    }
    if (schema.has("const") && !schema.get("const").equals(value))
      errors.add(at + ": " + value + " is not " + schema.get("const"));
    if (schema.has("enum")) {
      boolean any = false;
      for (JsonNode e : schema.get("enum")) any |= e.equals(value);
      if (!any) errors.add(at + ": " + value + " is not one of " + schema.get("enum"));
    }
    if (value.isTextual() && schema.has("pattern")) {
      if (!Pattern.compile(schema.get("pattern").asText()).matcher(value.asText()).find())
        errors.add(at + ": " + value + " does not match " + schema.get("pattern"));
    }
    if (value.isObject()) {
      JsonNode props = schema.path("properties");
      for (JsonNode required : schema.path("required"))
        if (!value.has(required.asText())) errors.add(at + ": no " + required.asText());
      for (Iterator<Map.Entry<String, JsonNode>> it = value.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> field = it.next();
        if (props.has(field.getKey()))
          check(props.get(field.getKey()), field.getValue(), at + "." + field.getKey(), errors);
        else if (schema.path("additionalProperties").isBoolean()
            && !schema.get("additionalProperties").asBoolean())
          errors.add(at + ": undocumented field " + field.getKey());
      }
    }
    if (value.isArray() && schema.has("items")) {
      int i = 0;
      for (JsonNode item : value) check(schema.get("items"), item, at + "[" + i++ + "]", errors);
    }
  }

  static String typeOf(JsonNode v) {
    if (v.isNull()) return "null";
    if (v.isTextual()) return "string";
    if (v.isBoolean()) return "boolean";
    if (v.isIntegralNumber()) return "integer";
    if (v.isNumber()) return "number";
    if (v.isArray()) return "array";
    return "object";
  }
}
