package dev.tickmark.cli;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * Follows a rental's {@code GET /v1/rentals/{id}/events} stream. The engine sends the rental's
 * current state first, so nothing between a command and its subscription is missed; if the stream
 * closes early, the rental is read again and the stream reopened.
 */
final class RentalEvents {
  static final int MAX_REOPENS = 5;

  private RentalEvents() {}

  /** Whether a rental view is final. */
  static boolean ended(JsonNode rental) {
    return "ended".equals(rental.path("status").asText());
  }

  /**
   * Why a rental ended, as one phrase: its end reason, and for a workload that ended by itself its
   * exit status ({@code workload_exited, exit code 3}).
   */
  static String endReason(JsonNode rental) {
    String reason = rental.path("end_reason").asText("ended");
    JsonNode code = rental.path("exit_code");
    return code.isIntegralNumber() ? reason + ", exit code " + code.asInt() : reason;
  }

  /**
   * How an ended rental ended, as the CLI says it: {@code "ended (workload_exited, exit code 3):
   * billed 42 s, cost 0.029050 EUR"}; {@code verb} replaces "ended".
   */
  static String ending(JsonNode rental, String verb) {
    return verb
        + " ("
        + endReason(rental)
        + "): billed "
        + rental.path("billed_seconds").asLong()
        + " s, cost "
        + rental.path("cost").asText()
        + " EUR";
  }

  /** Whether the rental has been matched with a host (its price is frozen). */
  static boolean matched(JsonNode rental) {
    return rental.hasNonNull("price_per_gpu_hour");
  }

  /**
   * Hands every event to {@code onEvent} and returns the rental view ({@code status} or {@code end}
   * event) that first satisfies {@code until}, or the final one.
   */
  static JsonNode follow(
      Http http, String rentalId, Predicate<JsonNode> until, Consumer<Http.Event> onEvent) {
    JsonNode[] last = {null};
    String path = "/v1/rentals/" + ApiCommand.segment(rentalId) + "/events";
    for (int opened = 0; opened <= MAX_REOPENS; opened++) {
      http.events(
          path,
          event -> {
            onEvent.accept(event);
            if (!event.type().equals("status") && !event.type().equals("end")) return true;
            last[0] = event.json();
            return !(until.test(last[0]) || ended(last[0]));
          });
      if (last[0] != null && (until.test(last[0]) || ended(last[0]))) return last[0];
      JsonNode now = http.get("/v1/rentals/" + ApiCommand.segment(rentalId)).json();
      if (until.test(now) || ended(now)) return now;
    }
    throw new UnreachableException(
        "the engine keeps closing the event stream of " + rentalId, null);
  }
}
