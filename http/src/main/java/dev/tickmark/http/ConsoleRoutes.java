package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.pekko.http.javadsl.model.ContentType;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpHeader;
import org.apache.pekko.http.javadsl.model.headers.RawHeader;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * The web console's static files: {@code GET /} is its page, {@code GET /console/<file>} its
 * scripts, stylesheet and data, read from {@code tickmark-console/} on the classpath (the console
 * module, in the node's jar). Only names of the shapes the console uses are served, so no path can
 * reach another resource of the classpath; anything else under {@code /console/} is a 404. The
 * console routes by URL fragment ({@code /#/offers}), so the server needs no fallback to the page.
 *
 * <p>Every answer carries a strict Content-Security-Policy: scripts, styles and connections from
 * this origin only, no inline script or style, no framing.
 */
public final class ConsoleRoutes {
  /** The operations {@link #route()} serves; the tests hold it to the code and to openapi.json. */
  static final java.util.List<Operation> OPERATIONS =
      java.util.List.of(Operation.get("/"), Operation.get("/console/{file}"));

  static final String ROOT = "tickmark-console/";
  static final String CSP =
      "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
          + "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
          + "form-action 'self'; frame-ancestors 'none'";

  private static final Pattern FILE =
      Pattern.compile("([a-z0-9][a-z0-9-]*/)?[a-z0-9][a-z0-9.-]*\\.(html|js|css|json|svg)");
  private static final Map<String, ContentType> TYPES =
      Map.of(
          "html", ContentTypes.TEXT_HTML_UTF8,
          "js", ContentTypes.parse("text/javascript; charset=UTF-8"),
          "css", ContentTypes.parse("text/css; charset=UTF-8"),
          "json", ContentTypes.APPLICATION_JSON,
          "svg", ContentTypes.parse("image/svg+xml"));
  static final List<HttpHeader> HEADERS =
      List.of(
          RawHeader.create("Content-Security-Policy", CSP),
          RawHeader.create("X-Content-Type-Options", "nosniff"),
          RawHeader.create("Referrer-Policy", "no-referrer"),
          RawHeader.create("X-Frame-Options", "DENY"),
          // revalidated on every load (ETag/Last-Modified): a node upgrade is seen at once
          RawHeader.create("Cache-Control", "no-cache"));

  public Route route() {
    return concat(
        pathEndOrSingleSlash(() -> get(() -> file("index.html"))),
        pathPrefix("console", () -> get(() -> extractUnmatchedPath(this::named))));
  }

  private Route named(String rest) {
    String name = rest.startsWith("/") ? rest.substring(1) : rest;
    return FILE.matcher(name).matches() && !name.contains("..") ? file(name) : notFound();
  }

  private static Route notFound() {
    return complete(new Problem(404, "not_found", "no such console file").toResponse());
  }

  private Route file(String name) {
    String extension = name.substring(name.lastIndexOf('.') + 1);
    // a missing file is 404; an Accept that excludes the file's type is the router's 406 (before,
    // getFromResource's rejection fell through to the 404: the fuzzer's GET / with image/png;q=0)
    if (ConsoleRoutes.class.getClassLoader().getResource(ROOT + name) == null) return notFound();
    return respondWithHeaders(HEADERS, () -> getFromResource(ROOT + name, TYPES.get(extension)));
  }
}
