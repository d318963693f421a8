package dev.tickmark.http;

import org.apache.pekko.event.LoggingAdapter;
import org.apache.pekko.http.ParsingErrorHandler;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.scaladsl.model.ErrorInfo;
import org.apache.pekko.http.scaladsl.model.StatusCode;
import org.apache.pekko.http.scaladsl.settings.ServerSettings;

/**
 * The answer to a request so broken that no route sees it — a request line or URI that does not
 * parse or is over 2 KiB, a header over 8 KiB or over 64 headers, a {@code Content-Length} that is
 * no number: problem+json with a stable code, as every other error (Pekko HTTP's default answers
 * plain text). Set as {@code pekko.http.server.parsing.error-handler} (the node's http.conf).
 *
 * <p>Such a request is always the client's fault, so it is always a 4xx: an unsupported transfer
 * coding or HTTP version, which Pekko answers 501 or 505, is {@code 400 bad_request} here. The
 * parser's detail goes to the client but not to the log: it can quote the request's headers.
 *
 * <p>The answer carries {@code Strict-Transport-Security} as every answer over HTTPS does; the
 * handler cannot tell HTTPS from plain HTTP, and a browser ignores the header over plain HTTP (RFC
 * 6797, 8.1), so it is always there.
 */
public final class TransportProblems extends ParsingErrorHandler {
  public TransportProblems() {}

  @Override
  public HttpResponse handle(
      StatusCode status, ErrorInfo info, LoggingAdapter log, ServerSettings settings) {
    int code = status.intValue() >= 500 ? 400 : status.intValue();
    if (log.isDebugEnabled()) log.debug("Refused a malformed request with {}", code);
    return new Problem(code, codeFor(code), detail(info))
        .toResponse()
        .addHeader(
            org.apache.pekko.http.javadsl.model.headers.StrictTransportSecurity.create(
                HttpApi.HSTS_MAX_AGE_SECONDS));
  }

  /**
   * The code of a request refused before routing: the router's codes ({@link HttpApi#codeFor}),
   * {@code bad_request} for anything but a size limit; never a 5xx (see above).
   */
  public static String codeFor(int status) {
    return HttpApi.codeFor(status >= 500 ? 400 : status);
  }

  private static String detail(ErrorInfo info) {
    String summary = info.summary();
    // the parser's summary names a limit or a part of the request; keep answers small
    return summary.length() > 300 ? summary.substring(0, 300) : summary;
  }
}
