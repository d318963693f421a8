package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import java.util.List;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.headers.RawHeader;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * {@code GET /v1/openapi.json}: the OpenAPI 3.1 description of every operation in {@link
 * HttpApi#OPERATIONS}, a file of this jar ({@code OpenApiDocumentTest} holds the two to each
 * other). No auth; it changes only with the node's version, so caches may keep it a while
 * (revalidated with its ETag and Last-Modified after that).
 */
public final class OpenApiRoutes {
  /** Where the document is on the classpath. */
  public static final String RESOURCE = "dev/tickmark/http/openapi.json";

  static final List<Operation> OPERATIONS = List.of(Operation.get("/v1/openapi.json"));

  public Route route() {
    return path(
        "openapi.json",
        () ->
            get(
                () ->
                    respondWithHeader(
                        RawHeader.create("Cache-Control", "public, max-age=300"),
                        () -> getFromResource(RESOURCE, ContentTypes.APPLICATION_JSON))));
  }
}
