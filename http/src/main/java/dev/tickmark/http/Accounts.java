package dev.tickmark.http;

import dev.tickmark.engine.account.Account;
import java.time.Duration;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.pattern.StatusReply;

/**
 * The HTTP edge's handle on account entities: asks through sharding with the configured timeout.
 */
public final class Accounts {
  private final ClusterSharding sharding;
  private final Duration timeout;

  public Accounts(ActorSystem<?> system, Duration timeout) {
    this.sharding = ClusterSharding.get(system);
    this.timeout = timeout;
  }

  public <T> CompletionStage<T> ask(
      String accountId, Function<ActorRef<StatusReply<T>>, Account.Command> command) {
    return sharding
        .entityRefFor(Account.ENTITY_KEY, accountId)
        .askWithStatus(command::apply, timeout);
  }

  public CompletionStage<Account.Summary> summary(String accountId) {
    return sharding
        .entityRefFor(Account.ENTITY_KEY, accountId)
        .ask(Account.GetSummary::new, timeout);
  }

  /**
   * The summary of an open account, or a 404 problem: an account that does not exist looks like
   * someone else's.
   */
  public CompletionStage<Account.Summary> openSummary(String accountId) {
    return summary(accountId)
        .thenApply(
            s -> {
              if (!s.open()) throw Problem.notFound("no such account");
              return s;
            });
  }
}
