package dev.tickmark.http;

import static org.apache.pekko.http.javadsl.server.Directives.*;

import dev.tickmark.persistence.ops.OperatorAudit;
import java.time.Clock;
import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;
import java.util.regex.Pattern;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.server.Route;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Records every mutating operator request (anything but GET) in the operator audit log once it is
 * answered: who (the operator's name), what (the operation), which target (the id in its path),
 * when, the status answered and the client's address. The write runs on the JDBC executor and is
 * not waited for; a failed one is logged (without the request) and the answer is unchanged.
 */
final class OperatorActions {
  private static final Logger log = LoggerFactory.getLogger(OperatorActions.class);

  private final OperatorAudit audit;
  private final Clock clock;
  private final java.util.Set<java.net.InetAddress> trustedProxies;
  private final List<Template> templates;

  OperatorActions(
      OperatorAudit audit,
      Clock clock,
      java.util.Set<java.net.InetAddress> trustedProxies,
      List<Operation> operations) {
    this.audit = audit;
    this.clock = clock;
    this.trustedProxies = trustedProxies;
    this.templates =
        operations.stream().filter(op -> !op.method().equals("GET")).map(Template::of).toList();
  }

  /**
   * Runs {@code inner} for {@code operator}; a mutating request's answer (a problem included, as
   * the exception handler makes it) is recorded.
   */
  Route recorded(String operator, Supplier<Route> inner) {
    return extractRequest(
        request ->
            request.method().value().equals("GET")
                ? inner.get()
                : mapResponse(
                    response -> {
                      record(operator, request, response.status().intValue());
                      return response;
                    },
                    () -> handleExceptions(HttpApi.exceptionHandler(), inner)));
  }

  private void record(String operator, HttpRequest request, int status) {
    String method = request.method().value();
    String path = request.getUri().path();
    Optional<Template> template =
        templates.stream().filter(t -> t.matches(method, path)).findFirst();
    OperatorAudit.Entry entry =
        new OperatorAudit.Entry(
            null,
            clock.instant(),
            operator,
            method,
            template.map(t -> t.operation().toString()).orElse(method + " " + path),
            template.flatMap(t -> t.target(path)).orElse(null),
            status,
            RateLimits.client(request, trustedProxies).getHostAddress());
    audit
        .record(entry)
        .whenComplete(
            (id, failure) -> {
              if (failure != null)
                log.warn(
                    "Could not record operator {}'s {} ({}) in the audit log: {}",
                    operator,
                    entry.action(),
                    status,
                    Responses.unwrapped(failure).toString());
            });
  }

  /** An operation's path template as a pattern; its first {@code {…}} is the target. */
  private record Template(Operation operation, Pattern pattern) {
    static Template of(Operation op) {
      String regex = Pattern.quote(op.path()).replaceAll("\\{[a-z_0-9]+}", "\\\\E([^/]+)\\\\Q");
      return new Template(op, Pattern.compile(regex));
    }

    boolean matches(String method, String path) {
      return operation.method().equals(method) && pattern.matcher(path).matches();
    }

    Optional<String> target(String path) {
      var m = pattern.matcher(path);
      return m.matches() && m.groupCount() > 0 ? Optional.of(m.group(1)) : Optional.empty();
    }
  }
}
