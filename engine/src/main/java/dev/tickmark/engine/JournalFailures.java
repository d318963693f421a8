package dev.tickmark.engine;

import java.time.Duration;
import org.apache.pekko.actor.typed.BackoffSupervisorStrategy;
import org.apache.pekko.actor.typed.SupervisorStrategy;

/**
 * What every entity does when a journal write or read fails (the database is away): it stops
 * serving, and starts again, from what the journal holds, after a backoff of 200 ms that grows to 5
 * s while the failures go on. One strategy for all of them: it is immutable, and a running rental
 * would otherwise carry a copy of its own.
 */
public final class JournalFailures {
  /** {@code onPersistFailure} of every event-sourced entity. */
  public static final BackoffSupervisorStrategy RESTART_WITH_BACKOFF =
      SupervisorStrategy.restartWithBackoff(Duration.ofMillis(200), Duration.ofSeconds(5), 0.1);

  private JournalFailures() {}
}
