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

  @Test
  void aRefusalIsFinal() {
    AtomicInteger asked = new AtomicInteger();
    ExecutionException failed =
        assertThrows(
            ExecutionException.class,
            () ->
                AgentSocket.<String>askAgainOnTimeout(
                        () -> {
                          asked.incrementAndGet();
                          return CompletableFuture.failedStage(
                              new StatusReply.ErrorMessage("unauthorized"));
                        },
                        5)
                    .toCompletableFuture()
                    .get());
    assertInstanceOf(StatusReply.ErrorMessage.class, failed.getCause());
    assertEquals(1, asked.get());
  }

  @Test
  void theLastTimeoutIsTheAnswerWhenNoAttemptIsAnswered() {
    AtomicInteger asked = new AtomicInteger();
    ExecutionException failed =
        assertThrows(
            ExecutionException.class,
            () ->
                AgentSocket.<String>askAgainOnTimeout(
                        () -> {
                          asked.incrementAndGet();
                          return timedOut();
                        },
                        5)
                    .toCompletableFuture()
                    .get());
    assertInstanceOf(TimeoutException.class, failed.getCause());
    assertEquals(5, asked.get(), "as many questions as attempts");
  }
}
