package dev.tickmark.engine.payout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.payout.PayoutRun.Command;
import dev.tickmark.engine.payout.PayoutRun.Event;
import dev.tickmark.engine.payout.PayoutRun.PaymentView;
import dev.tickmark.engine.payout.PayoutRun.RunView;
import dev.tickmark.engine.payout.PayoutRun.State;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.apache.pekko.actor.testkit.typed.annotations.JUnit5TestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.JUnit5TestKitBuilder;
import org.apache.pekko.actor.testkit.typed.javadsl.TestKitJUnit5Extension;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.RecipientRef;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.persistence.testkit.javadsl.EventSourcedBehaviorTestKit;
import org.apache.pekko.persistence.testkit.javadsl.PersistenceTestKit;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The {@link PayoutRun} in an {@link EventSourcedBehaviorTestKit} (every message round-trips
 * through jackson-cbor; {@code restart()} is a crash and recovery) against REAL {@link Account}s on
 * the same in-memory journal, each behind a port that can hold back payouts, swallow the accounts'
 * answers or deliver a payout twice. The read side is a list the test sets.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(TestKitJUnit5Extension.class)
class PayoutRunTest {
  static final Config CONFIG =
      EventSourcedBehaviorTestKit.config().withFallback(ConfigFactory.load());
  static final Duration WAIT = Duration.ofSeconds(5);
  static final long EUR = 1_000_000;
  static final Account.PayoutDetails NL =
      new Account.PayoutDetails("Grace Hopper", "NL91ABNA0417164300", "ABNANL2A");
  private static final AtomicInteger IDS = new AtomicInteger();

  @JUnit5TestKit
  final ActorTestKit testKit =
      new JUnit5TestKitBuilder().withName("PayoutRunTest").withCustomConfig(CONFIG).build();

  private String runId;
  private PayoutRun.Ports ports;
  private PayoutRun.Settings settings;
  private EventSourcedBehaviorTestKit<Command, Event, State> kit;
  private final Map<String, AccountPort> accounts = new ConcurrentHashMap<>();
  private final AtomicReference<Supplier<CompletionStage<List<String>>>> readSide =
      new AtomicReference<>(() -> CompletableFuture.completedFuture(List.of()));

  @BeforeEach
  void freshRun() {
    runId = "run-" + IDS.incrementAndGet();
    accounts.clear();
    ports =
        new PayoutRun.Ports() {
          @Override
          public CompletionStage<List<String>> providersOwed(long minimum) {
            return readSide.get().get();
          }

          @Override
          public RecipientRef<Account.Command> account(String accountId) {
            AccountPort port = accounts.get(accountId);
            return port == null ? testKit.system().deadLetters() : port.ref;
          }
        };
    settings = new PayoutRun.Settings(Duration.ofMillis(500), Duration.ofMillis(100), 2);
    // Created before the accounts post anything: creating the testkit clears the in-memory journal.
    kit =
        EventSourcedBehaviorTestKit.create(
            testKit.system(), PayoutRun.create(runId, settings, ports, Clock.systemUTC()));
  }

  @Test
  void paysWholeCentsToEveryProviderOwedTheMinimumAndSkipsThoseItCannotPay() {
    AccountPort ada = provider("ada", 12_345_678, NL);
    AccountPort low = provider("low", 9_999_999, NL);
    AccountPort nodetails = provider("nodetails", 20 * EUR, null);
    AccountPort frozen = provider("frozen", 30 * EUR, NL);
    frozen.suspend();
    readSideSays(ada, low, nodetails, frozen);

    RunView run = start(10 * EUR);

    assertEquals("completed", run.status());
    assertEquals(
        List.of(new PaymentView(ada.id, runId + ":" + ada.id, 12_340_000, "paid", null, NL, null)),
        run.payouts());
    assertEquals(
        List.of(
            new PayoutRun.Skip(frozen.id, 30 * EUR, Rejection.ACCOUNT_SUSPENDED.wire()),
            new PayoutRun.Skip(nodetails.id, 20 * EUR, PayoutRun.NO_PAYOUT_DETAILS)),
        run.skipped());
    assertEquals(12_340_000, run.total());
    assertEquals(1, run.count());
    // The sub-cent rest stays owed; the others keep everything.
    assertEquals(5_678, ada.summary().earnings());
    assertEquals(9_999_999, low.summary().earnings());
    assertEquals(20 * EUR, nodetails.summary().earnings());
    assertEquals(30 * EUR, frozen.summary().earnings());
  }

  @Test
  void aRunWithNobodyToPayCompletesAtOnce() {
    AccountPort low = provider("low", 4 * EUR, NL);
    readSideSays(low);
    RunView run = start(10 * EUR);
    assertEquals("completed", run.status());
    assertEquals(List.of(), run.payouts());
    assertEquals(0, run.total());
  }

  @Test
  void trustsTheAccountOverALaggingReadSide() {
    AccountPort ada = provider("ada", 15 * EUR, NL);
    ada.payout("earlier-run:ada", 10 * EUR); // the read side has not seen this payout yet
    readSideSays(ada);
    RunView run = start(10 * EUR);
    assertEquals(List.of(), run.payouts(), "5 EUR left is below the minimum");
    assertEquals(5 * EUR, ada.summary().earnings());
  }

  @Test
  void aRunReDrivenAfterACrashPaysNothingTwice() {
    AccountPort ada = provider("ada", 25 * EUR, NL);
    AccountPort bob = provider("bob", 40 * EUR, NL);
    readSideSays(ada, bob);
    // The accounts apply the payouts but their answers are lost, as when the run's node dies.
    ada.swallowAnswers.set(true);
    bob.swallowAnswers.set(true);
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.Start(10 * EUR, client.getRef()));
    awaitAssert(() -> assertEquals(1, ada.events(Account.PaidOut.class).size()));
    awaitAssert(() -> assertEquals(1, bob.events(Account.PaidOut.class).size()));
    assertInstanceOf(PayoutRun.Paying.class, kit.getState());

    ada.swallowAnswers.set(false);
    bob.swallowAnswers.set(false);
    kit.restart();

    RunView run = awaitCompleted();
    assertEquals(List.of("paid", "paid"), run.payouts().stream().map(PaymentView::status).toList());
    assertEquals(65 * EUR, run.total());
    assertEquals(1, ada.events(Account.PaidOut.class).size());
    assertEquals(1, bob.events(Account.PaidOut.class).size());
    assertEquals(0, ada.summary().earnings());
    assertEquals(0, bob.summary().earnings());
    assertEquals(1, events(PayoutRun.Decided.class).size(), "the decision is never taken twice");
    assertEquals(2, events(PayoutRun.PaymentConfirmed.class).size());
  }

  @Test
  void aPayoutDeliveredTwiceIsPaidAndRecordedOnce() {
    AccountPort ada = provider("ada", 25 * EUR, NL);
    ada.duplicate.set(c -> c instanceof Account.Payout);
    readSideSays(ada);

    RunView run = start(10 * EUR);

    assertEquals(25 * EUR, run.total());
    awaitAssert(() -> assertEquals(2, ada.payoutsSeen.get(), "both copies reached the account"));
    assertEquals(1, ada.events(Account.PaidOut.class).size());
    assertEquals(1, events(PayoutRun.PaymentConfirmed.class).size());
    assertEquals(0, ada.summary().earnings());
  }

  @Test
  void aCrashBeforeTheDecisionDecidesAgainFromTheAccounts() {
    AccountPort ada = provider("ada", 25 * EUR, NL);
    CompletableFuture<List<String>> neverAnswers = new CompletableFuture<>();
    readSide.set(() -> neverAnswers);
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.Start(10 * EUR, client.getRef()));
    assertInstanceOf(PayoutRun.Deciding.class, kit.getState());

    readSideSays(ada);
    kit.restart();

    RunView run = awaitCompleted();
    assertEquals(25 * EUR, run.total());
    assertEquals(1, ada.events(Account.PaidOut.class).size());
  }

  @Test
  void aPayoutLostOnTheWayIsSentAgainUntilItIsPaidOnce() {
    AccountPort ada = provider("ada", 25 * EUR, NL);
    ada.drop.set(c -> c instanceof Account.Payout); // lost on the way: the account never sees it
    readSideSays(ada);
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.Start(10 * EUR, client.getRef()));
    awaitAssert(() -> assertTrue(ada.payoutsSeen.get() >= 2, "retried after the ask timed out"));
    assertEquals(0, ada.events(Account.PaidOut.class).size());

    ada.drop.set(c -> false);
    RunView run = client.receiveMessage(WAIT.multipliedBy(2)).getValue();
    assertEquals("completed", run.status());
    assertEquals(1, ada.events(Account.PaidOut.class).size());
  }

  @Test
  void recordsARefusalWhenTheAccountNoLongerCoversTheDecidedAmount() {
    AccountPort ada = provider("ada", 25 * EUR, NL);
    AccountPort bob = provider("bob", 40 * EUR, NL);
    ada.drop.set(c -> c instanceof Account.Payout);
    readSideSays(ada, bob);
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.Start(10 * EUR, client.getRef()));
    awaitAssert(() -> assertEquals(1, bob.events(Account.PaidOut.class).size()));
    // Meanwhile another run paid ada (say, a concurrent run with another key); then the first run's
    // payout arrives.
    ada.payout("other-run:ada", 20 * EUR);
    ada.drop.set(c -> false);

    RunView run = client.receiveMessage(WAIT.multipliedBy(2)).getValue();
    PaymentView refused =
        run.payouts().stream().filter(p -> p.accountId().equals(ada.id)).findFirst().orElseThrow();
    assertEquals("refused", refused.status());
    assertEquals(Rejection.INSUFFICIENT_EARNINGS.wire(), refused.reason());
    assertEquals(40 * EUR, run.total(), "a refused payout is not counted");
    assertEquals(1, run.count());
    assertEquals(5 * EUR, ada.summary().earnings());
  }

  @Test
  void anAccountSuspendedAfterTheDecisionIsNotPaid() {
    AccountPort ada = provider("ada", 25 * EUR, NL);
    ada.drop.set(c -> c instanceof Account.Payout);
    readSideSays(ada);
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.Start(10 * EUR, client.getRef()));
    awaitAssert(() -> assertInstanceOf(PayoutRun.Paying.class, kit.getState()));
    ada.suspend();
    ada.drop.set(c -> false);

    RunView run = client.receiveMessage(WAIT.multipliedBy(2)).getValue();
    assertEquals(List.of("refused"), run.payouts().stream().map(PaymentView::status).toList());
    assertEquals(Rejection.ACCOUNT_SUSPENDED.wire(), run.payouts().get(0).reason());
    assertEquals(25 * EUR, ada.summary().earnings());
  }

  @Test
  void aRepeatedStartJoinsTheSameRunAndAnotherMinimumIsAConflict() {
    AccountPort ada = provider("ada", 25 * EUR, NL);
    readSideSays(ada);
    RunView first = start(10 * EUR);
    RunView again = start(10 * EUR);
    assertEquals(first, again);
    assertEquals(1, ada.events(Account.PaidOut.class).size());

    TestProbe<StatusReply<RunView>> other = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.Start(5 * EUR, other.getRef()));
    StatusReply<RunView> conflict = other.receiveMessage(WAIT);
    assertTrue(conflict.isError());
    assertEquals(
        Rejection.IDEMPOTENCY_CONFLICT, Rejection.codeOf(conflict.getError().getMessage()));
  }

  @Test
  void refusesANonPositiveMinimumAndAnswersNotFoundForAnUnknownRun() {
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.Get(client.getRef()));
    assertEquals(
        Rejection.NOT_FOUND, Rejection.codeOf(client.receiveMessage(WAIT).getError().getMessage()));
    kit.runCommand(new PayoutRun.Start(0, client.getRef()));
    assertEquals(
        Rejection.INVALID_AMOUNT,
        Rejection.codeOf(client.receiveMessage(WAIT).getError().getMessage()));
    assertEquals(PayoutRun.Empty.INSTANCE, kit.getState());
  }

  @Test
  void aPayoutTheBankReturnsIsOwedAgainOnceAndTheNextRunSkipsItsDetailsUntilTheyAreGivenAgain() {
    AccountPort ada = provider("ada", 25 * EUR, NL);
    AccountPort bob = provider("bob", 40 * EUR, NL);
    readSideSays(ada, bob);
    start(10 * EUR);
    assertEquals(0, ada.summary().earnings());

    RunView returned = returnPayment(ada.id, "AC04");
    PaymentView adaView = payment(returned, ada.id);
    assertEquals("returned", adaView.status());
    assertEquals("AC04", adaView.reason());
    assertTrue(adaView.returnedAt() != null);
    assertEquals("paid", payment(returned, bob.id).status());
    assertEquals(25 * EUR, returned.returned());
    assertEquals(
        65 * EUR, returned.total(), "a returned payout was sent: the run's total keeps it");
    assertEquals("completed", returned.status());
    assertEquals(25 * EUR, ada.summary().earnings(), "owed to ada again");
    assertEquals(runId + ":" + ada.id, ada.summary().payoutReturned().payoutId());
    assertEquals(NL, ada.summary().payoutReturned().payee());

    // once: the same return again answers the run as it is and moves nothing; another reason for
    // the same payout is a conflict
    assertEquals(returned, returnPayment(ada.id, "AC04"));
    assertEquals(1, ada.events(Account.PayoutReturned.class).size());
    assertEquals(1, events(PayoutRun.PaymentReturned.class).size());
    assertEquals(Rejection.IDEMPOTENCY_CONFLICT, returnRefused(ada.id, "AC01"));
    assertEquals(25 * EUR, ada.summary().earnings());
    kit.restart();
    assertEquals(returned, awaitCompleted(), "the return survives recovery");

    // the next run does not send ada's money to the same details again
    AccountPort carol = provider("carol", 12 * EUR, NL);
    readSideSays(ada, carol);
    RunView next = startAnotherRun(runId + "-second", 10 * EUR);
    assertEquals(
        List.of(new PayoutRun.Skip(ada.id, 25 * EUR, PayoutRun.PAYOUT_RETURNED)), next.skipped());
    assertEquals(List.of(carol.id), next.payouts().stream().map(PaymentView::accountId).toList());

    // ada gives her details again: the run after pays her
    ada.<Account.Summary>ok(
        r -> new Account.SetPayoutDetails(NL.holderName(), NL.iban(), NL.bic(), r));
    RunView third = startAnotherRun(runId + "-third", 10 * EUR);
    assertEquals(List.of(ada.id), third.payouts().stream().map(PaymentView::accountId).toList());
    assertEquals(0, ada.summary().earnings());
  }

  @Test
  void onlyAPaidPayoutOfTheRunCanBeReturnedWithTheBanksReasonCode() {
    AccountPort ada = provider("ada", 25 * EUR, NL);
    AccountPort bob = provider("bob", 40 * EUR, NL);
    AccountPort stranger = provider("stranger", 40 * EUR, null);
    ada.drop.set(c -> c instanceof Account.Payout);
    readSideSays(ada, bob);
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.Start(10 * EUR, client.getRef()));
    awaitAssert(() -> assertEquals(1, bob.events(Account.PaidOut.class).size()));
    awaitAssert(() -> assertEquals("paid", payment(get(), bob.id).status()));

    assertEquals(Rejection.PAYOUT_NOT_PAID, returnRefused(ada.id, "AC04"), "still being paid");
    ada.payout("other-run:ada", 20 * EUR);
    ada.drop.set(c -> false);
    client.receiveMessage(WAIT.multipliedBy(2));
    assertEquals(Rejection.PAYOUT_NOT_PAID, returnRefused(ada.id, "AC04"), "refused, never paid");
    assertEquals(Rejection.NOT_FOUND, returnRefused(stranger.id, "AC04"));
    assertEquals(Rejection.NOT_FOUND, returnRefused(null, "AC04"));
    assertEquals(Rejection.INVALID_REASON, returnRefused(bob.id, "ac04"));
    assertEquals(Rejection.INVALID_REASON, returnRefused(bob.id, null));
    assertEquals(0, bob.events(Account.PayoutReturned.class).size());
    assertEquals(List.of(), events(PayoutRun.PaymentReturned.class));
  }

  @Test
  void aReturnWhoseAnswerIsLostIsCompletedByTheOperatorsRetry() {
    AccountPort ada = provider("ada", 25 * EUR, NL);
    readSideSays(ada);
    start(10 * EUR);
    ada.drop.set(c -> c instanceof Account.ReturnPayout);
    assertEquals(Rejection.UNAVAILABLE, returnRefused(ada.id, "AC04"));
    assertEquals(0, ada.summary().earnings());
    ada.drop.set(c -> false);
    assertEquals("returned", payment(returnPayment(ada.id, "AC04"), ada.id).status());
    assertEquals(25 * EUR, ada.summary().earnings());
    assertEquals(1, ada.events(Account.PayoutReturned.class).size());
  }

  @Test
  void aRunThatDoesNotExistOrHasNotDecidedHasNothingToReturn() {
    assertEquals(Rejection.NOT_FOUND, returnRefused("anyone", "AC04"));
    CompletableFuture<List<String>> neverAnswers = new CompletableFuture<>();
    readSide.set(() -> neverAnswers);
    kit.runCommand(
        new PayoutRun.Start(10 * EUR, testKit.<StatusReply<RunView>>createTestProbe().getRef()));
    assertEquals(Rejection.PAYOUT_NOT_PAID, returnRefused("anyone", "AC04"));
  }

  @Test
  void wholeCentsDropOnlyTheSubCentRest() {
    assertEquals(0, PayoutRun.wholeCents(9_999));
    assertEquals(10_000, PayoutRun.wholeCents(10_000));
    assertEquals(12_340_000, PayoutRun.wholeCents(12_345_678));
  }

  // ---------------------------------------------------------------------------------------------

  private RunView start(long minimum) {
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.Start(minimum, client.getRef()));
    StatusReply<RunView> reply = client.receiveMessage(WAIT);
    assertTrue(reply.isSuccess(), () -> "refused: " + reply);
    return reply.getValue();
  }

  /**
   * Another run on the same journal and accounts, as a plain actor (a second testkit would clear
   * the journal); answers when it completed.
   */
  private RunView startAnotherRun(String id, long minimum) {
    ActorRef<Command> run = testKit.spawn(PayoutRun.create(id, settings, ports, Clock.systemUTC()));
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    run.tell(new PayoutRun.Start(minimum, client.getRef()));
    StatusReply<RunView> reply = client.receiveMessage(WAIT);
    assertTrue(reply.isSuccess(), () -> "refused: " + reply);
    return reply.getValue();
  }

  private RunView get() {
    TestProbe<StatusReply<RunView>> probe = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.Get(probe.getRef()));
    return probe.receiveMessage(WAIT).getValue();
  }

  private RunView returnPayment(String accountId, String reason) {
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.ReturnPayment(accountId, reason, client.getRef()));
    StatusReply<RunView> reply = client.receiveMessage(WAIT.multipliedBy(2));
    assertTrue(reply.isSuccess(), () -> "refused: " + reply);
    return reply.getValue();
  }

  private Rejection returnRefused(String accountId, String reason) {
    TestProbe<StatusReply<RunView>> client = testKit.createTestProbe();
    kit.runCommand(new PayoutRun.ReturnPayment(accountId, reason, client.getRef()));
    StatusReply<RunView> reply = client.receiveMessage(WAIT.multipliedBy(2));
    assertTrue(reply.isError(), () -> "not refused: " + reply);
    return Rejection.codeOf(reply.getError().getMessage());
  }

  private static PaymentView payment(RunView run, String accountId) {
    return run.payouts().stream()
        .filter(p -> p.accountId().equals(accountId))
        .findFirst()
        .orElseThrow();
  }

  private RunView awaitCompleted() {
    return awaitAssert(
        () -> {
          TestProbe<StatusReply<RunView>> probe = testKit.createTestProbe();
          kit.runCommand(new PayoutRun.Get(probe.getRef()));
          RunView view = probe.receiveMessage(WAIT).getValue();
          assertEquals("completed", view.status());
          return view;
        });
  }

  private void readSideSays(AccountPort... owed) {
    List<String> ids = java.util.Arrays.stream(owed).map(a -> a.id).toList();
    readSide.set(() -> CompletableFuture.completedFuture(ids));
  }

  private AccountPort provider(String name, long earnings, Account.PayoutDetails details) {
    AccountPort port = new AccountPort(runId + "-" + name);
    accounts.put(port.id, port);
    port.open(name);
    port.<Account.Posting>ok(
        r -> new Account.CreditEarnings("rental-" + port.id, 60, earnings, earnings / 5, true, r));
    if (details != null)
      port.<Account.Summary>ok(
          r ->
              new Account.SetPayoutDetails(details.holderName(), details.iban(), details.bic(), r));
    return port;
  }

  private <E extends Event> List<E> events(Class<E> type) {
    List<E> found = new ArrayList<>();
    String pid = PersistenceId.of(PayoutRun.ENTITY_KEY.name(), runId).id();
    for (Object o : PersistenceTestKit.create(testKit.system()).persistedInStorage(pid))
      if (type.isInstance(o)) found.add(type.cast(o));
    return found;
  }

  private <T> T awaitAssert(Supplier<T> check) {
    return testKit.<Object>createTestProbe().awaitAssert(WAIT, check::get);
  }

  private void awaitAssert(Runnable check) {
    testKit
        .createTestProbe()
        .awaitAssert(
            WAIT,
            () -> {
              check.run();
              return null;
            });
  }

  /** A real account behind a port that can drop, duplicate or silence payouts. */
  private final class AccountPort {
    final String id;
    final ActorRef<Account.Command> account;
    final ActorRef<Account.Command> ref;
    final AtomicReference<Predicate<Account.Command>> drop = new AtomicReference<>(c -> false);
    final AtomicReference<Predicate<Account.Command>> duplicate = new AtomicReference<>(c -> false);
    final java.util.concurrent.atomic.AtomicBoolean swallowAnswers =
        new java.util.concurrent.atomic.AtomicBoolean();
    final AtomicInteger payoutsSeen = new AtomicInteger();

    AccountPort(String id) {
      this.id = id;
      this.account = testKit.spawn(Account.create(id, Clock.systemUTC()), "account-" + id);
      ActorRef<Account.Command> target = account;
      ActorRef<StatusReply<Account.Posting>> blackHole =
          testKit.<StatusReply<Account.Posting>>createTestProbe().getRef();
      this.ref =
          testKit.spawn(
              Behaviors.receive(Account.Command.class)
                  .onAnyMessage(
                      c -> {
                        Account.Command delivered = c;
                        if (c instanceof Account.Payout p) {
                          payoutsSeen.incrementAndGet();
                          if (swallowAnswers.get())
                            delivered = new Account.Payout(p.payoutId(), p.amount(), blackHole);
                        }
                        if (!drop.get().test(c)) {
                          target.tell(delivered);
                          if (duplicate.get().test(c)) {
                            payoutsSeen.incrementAndGet();
                            target.tell(delivered);
                          }
                        }
                        return Behaviors.same();
                      })
                  .build(),
              "port-" + id);
    }

    void open(String name) {
      this.<Account.Summary>ok(r -> new Account.Open(name, r));
    }

    void suspend() {
      this.<Account.Summary>ok(r -> new Account.Suspend("test", r));
    }

    void payout(String payoutId, long amount) {
      this.<Account.Posting>ok(r -> new Account.Payout(payoutId, amount, r));
    }

    <T> T ok(java.util.function.Function<ActorRef<StatusReply<T>>, Account.Command> command) {
      TestProbe<StatusReply<T>> probe = testKit.createTestProbe();
      account.tell(command.apply(probe.getRef()));
      StatusReply<T> reply = probe.receiveMessage(WAIT);
      assertTrue(reply.isSuccess(), () -> "refused: " + reply);
      return reply.getValue();
    }

    Account.Summary summary() {
      TestProbe<Account.Summary> probe = testKit.createTestProbe();
      account.tell(new Account.GetSummary(probe.getRef()));
      return probe.receiveMessage(WAIT);
    }

    <E extends Account.Event> List<E> events(Class<E> type) {
      List<E> found = new ArrayList<>();
      String pid = PersistenceId.of(Account.ENTITY_KEY.name(), id).id();
      for (Object o : PersistenceTestKit.create(testKit.system()).persistedInStorage(pid))
        if (type.isInstance(o)) found.add(type.cast(o));
      return found;
    }
  }
}
