package dev.tickmark.http;

import org.apache.pekko.http.javadsl.model.ContentType;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpCharsets;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.MediaTypes;
import org.apache.pekko.http.javadsl.model.StatusCode;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.RetryAfter;

/**
 * An RFC 9457 problem: {@code {"type","title","status","code","detail"}} as {@code
 * application/problem+json}. {@code code} is the stable, machine-readable part. Thrown inside
 * routes; the exception handler turns it into the response.
 */
public final class Problem extends RuntimeException {
  public static final ContentType.WithFixedCharset PROBLEM_JSON =
      ContentTypes.create(
          MediaTypes.applicationWithFixedCharset("problem+json", HttpCharsets.UTF_8));

  /**
   * What a 503 asks a client to wait: a database that restarts, or an entity that recovers, is back
   * within seconds.
   */
  static final long RETRY_AFTER_SECONDS = 5;

  private final int status;
  private final String code;

  public Problem(int status, String code, String detail) {
    super(detail, null, false, false); // no stack trace: this is an answer, not a failure
    this.status = status;
    this.code = code;
  }

  public static Problem badRequest(String code, String detail) {
    return new Problem(400, code, detail);
  }

  public static Problem notFound(String what) {
    return new Problem(404, "not_found", what);
  }

  public static Problem unauthorized(String detail) {
    return new Problem(401, "unauthorized", detail);
  }

  public int status() {
    return status;
  }

  public String code() {
    return code;
  }

  public String detail() {
    return getMessage();
  }

  public HttpResponse toResponse() {
    StatusCode statusCode = StatusCodes.get(status);
    String json =
        "{\"type\":\"https://tickmark.dev/problems/"
            + code
            + "\",\"title\":"
            + Json.quote(statusCode.reason())
            + ",\"status\":"
            + status
            + ",\"code\":"
            + Json.quote(code)
            + ",\"detail\":"
            + Json.quote(detail())
            + "}";
    HttpResponse response =
        HttpResponse.create()
            .withStatus(statusCode)
            .withEntity(HttpEntities.create(PROBLEM_JSON, json));
    // Unavailable is temporary (the database or an entity is away): tell clients when to come back.
    return status == 503 ? response.addHeader(RetryAfter.create(RETRY_AFTER_SECONDS)) : response;
  }
}
