package dev.tickmark.http;

import java.util.function.Function;
import org.apache.pekko.http.javadsl.server.Directives;
import org.apache.pekko.http.javadsl.server.MalformedRequestContentRejection;
import org.apache.pekko.http.javadsl.server.RejectionHandler;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.http.javadsl.unmarshalling.Unmarshaller;
import org.apache.pekko.http.scaladsl.model.EntityStreamSizeException;
import org.apache.pekko.util.ByteString;

/**
 * The request body, read whole. A body that cannot be read (over the size limit, or cut short) is
 * answered where it was read, not rejected: a rejection let the route tree try the next
 * alternative, and {@code POST /v1/hosts/registration-tokens} with a body over 64 KiB was answered
 * by {@code /v1/hosts/{id}} (404 "no such host") instead of 413 {@code payload_too_large}.
 */
public final class RequestBody {
  private static final RejectionHandler UNREADABLE =
      RejectionHandler.newBuilder()
          .handle(
              MalformedRequestContentRejection.class,
              r ->
                  Directives.complete(
                      (r.getCause() instanceof EntityStreamSizeException
                              ? Responses.problemFor(r.getCause())
                              : Problem.badRequest(
                                  "bad_request", "the request body could not be read"))
                          .toResponse()))
          .build();

  private RequestBody() {}

  public static Route read(Function<ByteString, Route> inner) {
    return Directives.handleRejections(
        UNREADABLE, () -> Directives.entity(Unmarshaller.entityToByteString(), inner));
  }
}
