package dev.tickmark.http.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.pattern.StatusReply;
import org.junit.jupiter.api.Test;

/**
 * The upgrade's questions to a host's entity: asked again while unanswered in time (its shard homed
 * on a lost node), never again after an answer or a refusal.
 */
class AskAgainOnTimeoutTest {
  static CompletionStage<String> timedOut() {
    return CompletableFuture.failedStage(new TimeoutException("no answer in 1 s"));
  }

  @Test
  void unansweredQuestionsAreAskedAgainUntilOneIsAnswered() throws Exception {
    AtomicInteger asked = new AtomicInteger();
    String answer =
        AgentSocket.askAgainOnTimeout(
                () ->
                    asked.incrementAndGet() < 3
                        ? timedOut()
                        : CompletableFuture.completedStage("identity"),
                5)
            .toCompletableFuture()
            .get();
    assertEquals("identity", answer);
    assertEquals(3, asked.get(), "two unanswered, the third answered");
  }

  /** How the questions ended when none was answered; {@code ask} counts them. */
  static Throwable failureOf(java.util.function.Supplier<CompletionStage<String>> ask) {
    ExecutionException failed =
        assertThrows(
            ExecutionException.class,
            () -> AgentSocket.askAgainOnTimeout(ask, 5).toCompletableFuture().get());
    return failed.getCause();
  }

  @Test
  void aRefusalIsFinal() {
    AtomicInteger asked = new AtomicInteger();
    Throwable failure =
        failureOf(
            () -> {
              asked.incrementAndGet();
              return CompletableFuture.failedStage(new StatusReply.ErrorMessage("unauthorized"));
            });
    assertInstanceOf(StatusReply.ErrorMessage.class, failure);
    assertEquals(1, asked.get());
  }

  @Test
  void theLastTimeoutIsTheAnswerWhenNoAttemptIsAnswered() {
    AtomicInteger asked = new AtomicInteger();
    Throwable failure =
        failureOf(
            () -> {
              asked.incrementAndGet();
              return timedOut();
            });
    assertInstanceOf(TimeoutException.class, failure);
    assertEquals(5, asked.get(), "as many questions as attempts");
  }
}
