package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.Rejection;
import io.swagger.v3.oas.models.OpenAPI;
import io.swagger.v3.oas.models.PathItem;
import io.swagger.v3.oas.models.media.Schema;
import io.swagger.v3.oas.models.parameters.Parameter;
import io.swagger.v3.oas.models.responses.ApiResponse;
import io.swagger.v3.oas.models.security.SecurityRequirement;
import io.swagger.v3.parser.OpenAPIV3Parser;
import io.swagger.v3.parser.core.models.ParseOptions;
import io.swagger.v3.parser.core.models.SwaggerParseResult;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code /v1/openapi.json} against the code: parsed by swagger-parser as client generators parse
 * it, it describes exactly the operations of {@link HttpApi#OPERATIONS} (which
 * OpenApiIntegrationTest holds to the live routes), with the scope {@link Scopes} demands, and only
 * problem codes the code base answers with — and every code it answers with is documented.
 */
class OpenApiDocumentTest {
  static String text;
  static OpenAPI doc;
  static SwaggerParseResult result;

  @BeforeAll
  static void parse() throws IOException {
    try (InputStream in =
        OpenApiDocumentTest.class.getClassLoader().getResourceAsStream(OpenApiRoutes.RESOURCE)) {
      assertNotNull(in, "no " + OpenApiRoutes.RESOURCE + " on the classpath");
      text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    ParseOptions options = new ParseOptions();
    options.setResolve(true); // every $ref must resolve, or the parser says so
    result = new OpenAPIV3Parser().readContents(text, null, options);
    doc = result.getOpenAPI();
  }

  @Test
  void parsesAsOpenApi31WithoutAnyMessage() {
    assertNotNull(doc, "not parsed: " + result.getMessages());
    assertEquals(List.of(), result.getMessages());
    assertTrue(doc.getOpenapi().startsWith("3.1."), doc.getOpenapi());
  }

  @Test
  void describesExactlyTheOperationsTheRoutesDeclare() {
    Set<String> declared = new TreeSet<>();
    for (Operation op : HttpApi.OPERATIONS)
      assertTrue(declared.add(op.toString()), "declared twice: " + op);
    Set<String> documented = new TreeSet<>(operations().keySet());
    Set<String> missing = new TreeSet<>(declared);
    missing.removeAll(documented);
    Set<String> extra = new TreeSet<>(documented);
    extra.removeAll(declared);
    assertEquals(Set.of(), missing, "served but not in openapi.json");
    assertEquals(Set.of(), extra, "in openapi.json but not served");
  }

  @Test
  void everyOperationIsDescribedWithItsParametersAndAnswers() {
    Set<String> ids = new HashSet<>();
    operations()
        .forEach(
            (name, op) -> {
              assertNotNull(op.getSummary(), name + ": summary");
              assertTrue(
                  ids.add(op.getOperationId()), name + ": operationId " + op.getOperationId());
              assertNotNull(op.getSecurity(), name + ": security (empty list for none)");
              Set<String> pathParams =
                  op.getParameters() == null
                      ? Set.of()
                      : op.getParameters().stream()
                          .filter(p -> "path".equals(p.getIn()))
                          .map(Parameter::getName)
                          .collect(Collectors.toSet());
              assertEquals(
                  templateNames(name.split(" ", 2)[1]), pathParams, name + ": path params");
              assertFalse(op.getResponses().isEmpty(), name);
              assertTrue(
                  op.getResponses().keySet().stream().anyMatch(s -> s.matches("[12][0-9][0-9]")),
                  name + ": no success answer");
              op.getResponses()
                  .forEach(
                      (status, response) -> {
                        assertNotNull(response.getDescription(), name + " " + status);
                        if (status.startsWith("4") || status.startsWith("5")) {
                          assertNotNull(
                              response.getContent().get("application/problem+json"),
                              name + " " + status + ": not problem+json");
                          assertFalse(codes(response).isEmpty(), name + " " + status + ": codes");
                        }
                      });
            });
  }

  @Test
  void everyApiKeyOperationNeedsTheScopeTheRouterDemands() {
    operations()
        .forEach(
            (name, op) -> {
              String method = name.split(" ", 2)[0];
              String path = name.split(" ", 2)[1];
              Set<String> schemes =
                  op.getSecurity().stream()
                      .flatMap(r -> r.keySet().stream())
                      .collect(Collectors.toSet());
              if (path.startsWith("/ops/")) {
                assertEquals(Set.of("operatorToken"), schemes, name);
              } else if (path.startsWith("/v1/agent/")) {
                assertTrue(schemes.contains("hostCredential"), name);
              } else if (schemes.contains("apiKey")) {
                // the role names of the requirement are the scope; Scopes decides from a real path
                String sample = path.replaceAll("\\{[a-z_0-9]+}", "x");
                List<String> scopes =
                    op.getSecurity().stream()
                        .map(r -> r.get("apiKey"))
                        .filter(s -> s != null)
                        .findFirst()
                        .orElseThrow();
                assertEquals(List.of(Scopes.required(method, sample)), scopes, name);
              }
              for (SecurityRequirement r : op.getSecurity())
                for (String scheme : r.keySet())
                  assertTrue(
                      doc.getComponents().getSecuritySchemes().containsKey(scheme), name + scheme);
            });
  }

  @Test
  void documentsOnlyProblemCodesTheCodeAnswersWith() throws IOException {
    Set<String> defined = definedCodes();
    Map<String, Set<String>> unknown = new TreeMap<>();
    documentedCodes()
        .forEach(
            (code, where) -> {
              if (!defined.contains(code)) unknown.put(code, where);
            });
    assertEquals(Map.of(), unknown, "codes no code answers with");
  }

  /**
   * Codes the engine has that never leave as an HTTP answer: refusals between entities (a hold the
   * rental manages, a match the matcher retries, a payout the run records as refused with its
   * reason) and the agent websocket's own closing reasons.
   */
  static final Set<String> NOT_HTTP_ANSWERS =
      Set.of(
          "hold_not_found",
          "hold_closed",
          // a launch's pending hold or reservation that went back: the rental ends unstarted
          "hold_expired",
          "reservation_expired",
          "hold_exceeded",
          "insufficient_earnings",
          "invalid_key",
          "token_used",
          "token_expired",
          "host_not_available",
          "insufficient_cards",
          "price_above_ceiling",
          "bad_public_key",
          "replaced",
          "reconnect",
          "heartbeat_timeout");

  @Test
  void documentsEveryProblemCodeTheCodeAnswersWith() throws IOException {
    Set<String> undocumented = new TreeSet<>(definedCodes());
    undocumented.removeAll(documentedCodes().keySet());
    undocumented.removeAll(NOT_HTTP_ANSWERS);
    assertEquals(
        Set.of(), undocumented, "codes the API answers with that openapi.json never lists");
  }

  @Test
  void listsEachCodeUnderTheStatusItIsAnsweredWith() throws IOException {
    Map<String, Set<Integer>> statuses = definedStatuses();
    @SuppressWarnings("unchecked")
    List<String> router = (List<String>) doc.getExtensions().get("x-router-problem-codes");
    Map<String, String> wrong = new TreeMap<>();
    operations()
        .forEach(
            (name, op) ->
                op.getResponses()
                    .forEach(
                        (status, r) -> {
                          for (String code : codes(r)) {
                            Set<Integer> answered = statuses.getOrDefault(code, Set.of());
                            if (!router.contains(code)
                                && !answered.contains(Integer.parseInt(status)))
                              wrong.put(name + " " + status + " " + code, "answered " + answered);
                          }
                        }));
    assertEquals(Map.of(), wrong);
  }

  /**
   * The statuses each code is answered with: a rejection's by {@link Responses#status}, a literal
   * one's where it is made (badRequest is 400, new Problem(409, "x") 409).
   */
  static Map<String, Set<Integer>> definedStatuses() throws IOException {
    Map<String, Set<Integer>> statuses = new TreeMap<>();
    for (Rejection r : Rejection.values())
      statuses.computeIfAbsent(r.wire(), k -> new TreeSet<>()).add(Responses.status(r));
    Pattern badRequest = Pattern.compile("badRequest\\(\\s*\"([a-z][a-z0-9_]*)\"");
    Pattern problem = Pattern.compile("new Problem\\(\\s*([0-9]{3}),\\s*\"([a-z][a-z0-9_]*)\"");
    try (Stream<Path> files = Files.walk(Path.of("src/main/java"))) {
      for (Path source : files.filter(p -> p.toString().endsWith(".java")).toList()) {
        String code = Files.readString(source);
        Matcher m = badRequest.matcher(code);
        while (m.find()) statuses.computeIfAbsent(m.group(1), k -> new TreeSet<>()).add(400);
        m = problem.matcher(code);
        while (m.find())
          statuses
              .computeIfAbsent(m.group(2), k -> new TreeSet<>())
              .add(Integer.parseInt(m.group(1)));
      }
    }
    return statuses;
  }

  @Test
  void moneyIsADecimalStringWithExactlySixDecimals() {
    Schema<?> money = doc.getComponents().getSchemas().get("Money");
    Pattern pattern = Pattern.compile(money.getPattern());
    for (String ok : List.of("0.000000", "2.890000", "-12.000001", "1000000000000.000000"))
      assertTrue(pattern.matcher(ok).matches(), ok);
    for (String bad : List.of("2.89", "2", "2.8900000", "+1.000000", "1e3", ""))
      assertFalse(pattern.matcher(bad).matches(), bad);
    assertEquals(dev.tickmark.engine.money.Money.format(2_890_000), "2.890000");
    assertTrue(pattern.matcher(dev.tickmark.engine.money.Money.format(-803)).matches());
  }

  @Test
  void requestAmountsAreExactlyTheFieldsTheServerReadsAsMoney() {
    Map<String, String> wrong = new TreeMap<>();
    operations()
        .forEach(
            (name, op) -> {
              if (op.getRequestBody() == null) return;
              op.getRequestBody()
                  .getContent()
                  .forEach(
                      (media, content) -> {
                        Schema<?> body = OpenApiSchemaTest.resolve(content.getSchema());
                        if (body.getProperties() == null) return;
                        body.getProperties()
                            .forEach(
                                (field, schema) -> {
                                  boolean amount = refersTo(schema, "AmountInput");
                                  if (amount != Json.AMOUNT_FIELDS.contains(field))
                                    wrong.put(name + " " + field, amount ? "AmountInput" : "other");
                                });
                      });
            });
    assertEquals(Map.of(), wrong, "Json.AMOUNT_FIELDS against the AmountInput fields");
  }

  static boolean refersTo(Schema<?> schema, String name) {
    if (schema.get$ref() != null) return schema.get$ref().endsWith("/" + name);
    return schema.getAnyOf() != null && schema.getAnyOf().stream().anyMatch(s -> refersTo(s, name));
  }

  // ---- what the document says

  /** "GET /v1/rentals/{id}" → its operation. */
  static Map<String, io.swagger.v3.oas.models.Operation> operations() {
    Map<String, io.swagger.v3.oas.models.Operation> ops = new TreeMap<>();
    doc.getPaths()
        .forEach(
            (path, item) ->
                item.readOperationsMap()
                    .forEach((method, op) -> ops.put(method.name() + " " + path, op)));
    return ops;
  }

  /** Every code in an {@code x-problem-codes} list (and the router's), with where it is listed. */
  static Map<String, Set<String>> documentedCodes() {
    Map<String, Set<String>> codes = new TreeMap<>();
    operations()
        .forEach(
            (name, op) ->
                op.getResponses()
                    .forEach(
                        (status, r) ->
                            codes(r)
                                .forEach(
                                    c ->
                                        codes
                                            .computeIfAbsent(c, k -> new TreeSet<>())
                                            .add(name + " " + status))));
    for (Object c : (List<?>) doc.getExtensions().get("x-router-problem-codes"))
      codes.computeIfAbsent((String) c, k -> new TreeSet<>()).add("router");
    return codes;
  }

  @SuppressWarnings("unchecked")
  static List<String> codes(ApiResponse r) {
    Object codes = r.getExtensions() == null ? null : r.getExtensions().get("x-problem-codes");
    return codes == null ? List.of() : (List<String>) codes;
  }

  static Set<String> templateNames(String path) {
    Set<String> names = new HashSet<>();
    Matcher m = Pattern.compile("\\{([a-z_0-9]+)}").matcher(path);
    while (m.find()) names.add(m.group(1));
    return names;
  }

  // ---- what the code answers with

  /** Where a problem is made with a literal code: new Problem(status, "x"), badRequest("x"), … */
  private static final List<Pattern> CODE_SITES =
      List.of(
          Pattern.compile("badRequest\\(\\s*\"([a-z][a-z0-9_]*)\""),
          Pattern.compile("new Problem\\(\\s*[A-Za-z0-9_.()]+,\\s*\"([a-z][a-z0-9_]*)\""),
          Pattern.compile("put\\(\"code\",\\s*\"([a-z][a-z0-9_]*)\""),
          Pattern.compile("return \"([a-z][a-z0-9_]*)\";")); // HttpApi.codeFor

  /**
   * The engine's rejection codes and every literal code in this module's sources (the test runs in
   * the module's directory).
   */
  static Set<String> definedCodes() throws IOException {
    Set<String> codes = new TreeSet<>();
    for (Rejection r : Rejection.values()) codes.add(r.wire());
    List<Path> sources;
    try (Stream<Path> files = Files.walk(Path.of("src/main/java"))) {
      sources = files.filter(p -> p.toString().endsWith(".java")).toList();
    }
    assertFalse(sources.isEmpty(), "no sources under " + Path.of("src/main/java").toAbsolutePath());
    List<String> found = new ArrayList<>();
    for (Path source : sources) {
      String code;
      try {
        code = Files.readString(source);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      boolean codeFor = source.endsWith("HttpApi.java");
      for (Pattern p : CODE_SITES) {
        if (p.pattern().startsWith("return") && !codeFor) continue;
        Matcher m = p.matcher(code);
        while (m.find()) found.add(m.group(1));
      }
    }
    codes.addAll(found);
    return codes;
  }

  static PathItem path(String path) {
    return doc.getPaths().get(path);
  }
}
