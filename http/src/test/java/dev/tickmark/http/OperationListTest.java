package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.http.agent.AgentSocket;
import dev.tickmark.http.agent.SnapshotTransferRoutes;
import dev.tickmark.http.metrics.MetricsRoutes;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Each routes class's {@code OPERATIONS} against its own source: the path segments its directives
 * match ({@code path("stop")}, {@code segment("agent").slash("connect")}) are exactly the literal
 * segments of the operations it lists. A route added under a new name without its operation (and so
 * without its place in openapi.json) fails here; a new method on a listed path fails in
 * OpenApiIntegrationTest, which asks a real node.
 */
class OperationListTest {
  /** Every source file that matches path segments, and the operations it declares. */
  static final Map<String, List<Operation>> ROUTES_CLASSES =
      Map.ofEntries(
          Map.entry("AccountRoutes.java", AccountRoutes.OPERATIONS),
          Map.entry("PaymentRoutes.java", PaymentRoutes.OPERATIONS),
          Map.entry("HostRoutes.java", HostRoutes.OPERATIONS),
          Map.entry("MarketRoutes.java", MarketRoutes.OPERATIONS),
          Map.entry("agent/AgentSocket.java", AgentSocket.OPERATIONS),
          Map.entry("agent/SnapshotTransferRoutes.java", SnapshotTransferRoutes.OPERATIONS),
          Map.entry("RentalRoutes.java", RentalRoutes.OPERATIONS),
          Map.entry("SnapshotRoutes.java", SnapshotRoutes.OPERATIONS),
          Map.entry("OpenApiRoutes.java", OpenApiRoutes.OPERATIONS),
          Map.entry("OpsRoutes.java", OpsRoutes.OPERATIONS),
          Map.entry("OpsHostRoutes.java", OpsHostRoutes.OPERATIONS),
          Map.entry("OpsRentalRoutes.java", OpsRentalRoutes.OPERATIONS),
          Map.entry("OpsPayoutRoutes.java", OpsPayoutRoutes.OPERATIONS),
          Map.entry("metrics/MetricsRoutes.java", MetricsRoutes.OPERATIONS),
          Map.entry("ConsoleRoutes.java", ConsoleRoutes.OPERATIONS),
          Map.entry("HttpApi.java", HttpApi.OWN_OPERATIONS));

  /** The prefixes HttpApi mounts the others under. */
  static final Set<String> MOUNTS = Set.of("v1", "ops");

  private static final Pattern MATCHED_SEGMENT =
      Pattern.compile(
          "\\b(?:path|pathPrefix|pathPrefixTest|rawPathPrefix|rawPathPrefixTest|segment|slash)"
              + "\\(\\s*\"([^\"]*)\"");

  static final Path SOURCES = Path.of("src/main/java/dev/tickmark/http");

  @Test
  void everySegmentARoutesClassMatchesIsInTheOperationsItLists() throws IOException {
    Map<String, String> wrong = new TreeMap<>();
    for (Map.Entry<String, List<Operation>> e : ROUTES_CLASSES.entrySet()) {
      Set<String> matched = matchedSegments(Files.readString(SOURCES.resolve(e.getKey())));
      Set<String> listed = new TreeSet<>();
      for (Operation op : e.getValue())
        for (String s : op.path().split("/"))
          if (!s.isEmpty() && !s.startsWith("{") && !MOUNTS.contains(s)) listed.add(s);
      if (e.getKey().equals("HttpApi.java")) listed.addAll(MOUNTS);
      if (!matched.equals(listed))
        wrong.put(e.getKey(), "matches " + matched + " but lists " + listed);
    }
    assertEquals(Map.of(), wrong);
  }

  @Test
  void noOtherSourceMatchesPathSegments() throws IOException {
    Set<String> others = new TreeSet<>();
    try (Stream<Path> files = Files.walk(SOURCES)) {
      for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
        String name = SOURCES.relativize(f).toString().replace('\\', '/');
        if (!ROUTES_CLASSES.containsKey(name) && !matchedSegments(Files.readString(f)).isEmpty())
          others.add(name);
      }
    }
    assertTrue(others.isEmpty(), "routes classes without an OPERATIONS entry here: " + others);
  }

  static Set<String> matchedSegments(String source) {
    Set<String> segments = new TreeSet<>();
    Matcher m = MATCHED_SEGMENT.matcher(source);
    while (m.find()) segments.add(m.group(1));
    return segments;
  }
}
