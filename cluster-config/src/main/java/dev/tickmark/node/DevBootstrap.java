package dev.tickmark.node;

import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.money.Money;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityRef;

/**
 * Dev mode: a demo renter with a welcome credit, so a new user can call the API at once. Idempotent:
 * restarting the dev node keeps the same account and balance and prints a fresh key.
 */
final class DevBootstrap {
  static final String DEMO_ACCOUNT = "acc_demo";
  static final long WELCOME_CREDIT = Money.parse("100");

  record DemoRenter(String accountId, String apiKey, Account.Summary summary) {}

  private DevBootstrap() {}

  static DemoRenter seed(Node node) throws Exception {
    Duration timeout = Duration.ofSeconds(30);
    EntityRef<Account.Command> account = ClusterSharding.get(node.system()).entityRefFor(Account.ENTITY_KEY, DEMO_ACCOUNT);
    account.<Account.Summary>askWithStatus(reply -> new Account.Open("Demo renter", reply), timeout)
        .toCompletableFuture().get(30, TimeUnit.SECONDS);
    account.<Account.Posting>askWithStatus(reply -> new Account.Deposit("manual:dev-welcome-credit", WELCOME_CREDIT, reply), timeout)
        .toCompletableFuture().get(30, TimeUnit.SECONDS);
    String apiKey = node.apiKeys().create(DEMO_ACCOUNT, "dev").toCompletableFuture().get(30, TimeUnit.SECONDS).apiKey();
    Account.Summary summary = account.ask(Account.GetSummary::new, timeout).toCompletableFuture().get(30, TimeUnit.SECONDS);
    return new DemoRenter(DEMO_ACCOUNT, apiKey, summary);
  }
}
