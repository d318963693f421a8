package dev.tickmark.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.pekko.event.NoLogging$;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.scaladsl.model.ErrorInfo;
import org.apache.pekko.http.scaladsl.model.StatusCode;
import org.apache.pekko.http.scaladsl.model.StatusCodes;
import org.junit.jupiter.api.Test;

class TransportProblemsTest {
  private static HttpResponse answer(StatusCode status) {
    return new TransportProblems()
        .handle(status, new ErrorInfo("the parser's summary", "detail"), NoLogging$.MODULE$, null);
  }

  @Test
  void aRequestTooBrokenToRouteIsAProblemWithAStableCode() {
    assertEquals(431, answer(StatusCodes.RequestHeaderFieldsTooLarge()).status().intValue());
    assertEquals(Problem.PROBLEM_JSON, answer(StatusCodes.BadRequest()).entity().getContentType());
    assertEquals("headers_too_large", TransportProblems.codeFor(431));
    assertEquals("uri_too_long", TransportProblems.codeFor(414));
    assertEquals("payload_too_large", TransportProblems.codeFor(413));
    assertEquals("bad_request", TransportProblems.codeFor(400));
  }

  @Test
  void theAnswerCarriesStrictTransportSecurityWhichABrowserHeedsOnlyOverHttps() {
    assertEquals(
        java.util.Optional.of("max-age=" + HttpApi.HSTS_MAX_AGE_SECONDS),
        answer(StatusCodes.UriTooLong())
            .getHeader("Strict-Transport-Security")
            .map(h -> h.value()));
  }

  @Test
  void whatPekkoAnswers501Or505IsTheClientsFault400() {
    assertEquals(400, answer(StatusCodes.NotImplemented()).status().intValue());
    assertEquals(400, answer(StatusCodes.HTTPVersionNotSupported()).status().intValue());
    String body =
        ((org.apache.pekko.http.javadsl.model.HttpEntity.Strict)
                answer(StatusCodes.NotImplemented()).entity())
            .getData()
            .utf8String();
    assertTrue(body.contains("\"code\":\"bad_request\""), body);
    assertTrue(body.contains("the parser's summary"), body);
  }
}
