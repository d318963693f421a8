package dev.tickmark.engine.rental;

import dev.tickmark.engine.Rejection;
import dev.tickmark.engine.account.Account;
import dev.tickmark.engine.rental.Rental.Command;
import dev.tickmark.engine.rental.Rental.Finished;
import dev.tickmark.engine.rental.Rental.RefundDelivered;
import dev.tickmark.engine.rental.Rental.RefundView;
import dev.tickmark.engine.rental.Rental.Refunded;
import dev.tickmark.engine.rental.Rental.Timer;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.pattern.StatusReply;

/**
 * Delivers a closed rental's refunds to its two accounts: the renter's balance takes the refund
 * back ({@link Account.RefundCharge}), the provider's earnings and the platform's fee give their
 * shares back ({@link Account.ReverseEarnings}). Both are cumulative, so only the latest refund is
 * ever sent, and retried with a growing wait until acknowledged; the operator who asked is answered
 * once both accounts have it. Actor-local: after a restart the rental sends its latest refund
 * again, which the accounts acknowledge without moving anything if they had it.
 */
final class RefundDelivery {
  private final String rentalId;
  private final Rental.Settings settings;
  private final Rental.Ports ports;
  private final ActorContext<Command> context;
  private final TimerScheduler<Command> timers;

  private long renterThrough;
  private long providerThrough;
  private int failedDeliveries;
  private final List<Waiting> waiting = new ArrayList<>();

  private record Waiting(RefundView view, ActorRef<StatusReply<RefundView>> replyTo) {}

  RefundDelivery(
      String rentalId,
      Rental.Settings settings,
      Rental.Ports ports,
      ActorContext<Command> context,
      TimerScheduler<Command> timers) {
    this.rentalId = rentalId;
    this.settings = settings;
    this.ports = ports;
    this.context = context;
    this.timers = timers;
  }

  /**
   * Answers {@code replyTo} with {@code refund} once both accounts have it (at once if they do).
   */
  void answerWhenDelivered(Finished state, Refunded refund, ActorRef<StatusReply<RefundView>> to) {
    RefundView view = Rental.refundView(rentalId, state, refund);
    if (delivered(refund.cumulativeAmount())) {
      to.tell(StatusReply.success(view));
      return;
    }
    waiting.add(new Waiting(view, to));
    deliver(state);
  }

  /** Sends the latest refund to each account that has not acknowledged it yet. */
  void deliver(Finished state) {
    Refunded latest = state.latestRefund();
    if (latest == null) return;
    long cumulative = latest.cumulativeAmount();
    if (renterThrough < cumulative)
      context.askWithStatus(
          Account.Posting.class,
          ports.account(state.order().renterId()),
          settings.askTimeout(),
          reply -> new Account.RefundCharge(rentalId, cumulative, reply),
          (posting, failure) -> new RefundDelivered(true, cumulative, Rejection.codeOf(failure)));
    if (providerThrough < cumulative)
      context.askWithStatus(
          Account.Posting.class,
          ports.account(state.terms().providerId()),
          settings.askTimeout(),
          reply ->
              new Account.ReverseEarnings(
                  rentalId, latest.cumulativeProvider(), latest.cumulativePlatform(), reply),
          (posting, failure) -> new RefundDelivered(false, cumulative, Rejection.codeOf(failure)));
  }

  /** An account's answer: noted, and the operators waiting for what is now delivered answered. */
  void acknowledged(Finished state, RefundDelivered d) {
    if (d.refusal() != null) {
      int spread = SettlementDelivery.redeliverySpread(rentalId, failedDeliveries);
      timers.startSingleTimer(
          Timer.REDELIVER_REFUND,
          Timer.REDELIVER_REFUND,
          SettlementDelivery.redeliveryDelay(settings.retryInterval(), failedDeliveries++, spread));
      return;
    }
    failedDeliveries = 0;
    if (d.renter()) renterThrough = Math.max(renterThrough, d.cumulative());
    else providerThrough = Math.max(providerThrough, d.cumulative());
    waiting.removeIf(
        w -> {
          if (!delivered(w.view().cumulativeRefunded())) return false;
          w.replyTo().tell(StatusReply.success(w.view()));
          return true;
        });
  }

  private boolean delivered(long cumulative) {
    return renterThrough >= cumulative && providerThrough >= cumulative;
  }
}
