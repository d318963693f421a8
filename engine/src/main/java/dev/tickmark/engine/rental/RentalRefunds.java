package dev.tickmark.engine.rental;

import dev.tickmark.engine.rental.Rental.Checkpoint;
import java.math.BigInteger;

/**
 * How a refund of a rental is split back: like its charge was. The provider gives back its share of
 * the charge and the platform its fee, in proportion, computed on the cumulative refund (as
 * metering is cumulative), so that partial refunds add up to exactly the charge's split when the
 * whole charge is refunded, and neither share ever shrinks from one refund to the next.
 */
final class RentalRefunds {
  private RentalRefunds() {}

  /**
   * The provider's cumulative share of {@code cumulativeRefund} µ€ refunded of a rental whose final
   * settlement is {@code charge}: {@code floor(refund × provider / cost)}. The platform gives back
   * the rest, so a rounding µ€ is the platform's, in the provider's favour.
   */
  static long providerShare(long cumulativeRefund, Checkpoint charge) {
    if (cumulativeRefund < 0 || cumulativeRefund > charge.cost())
      throw new IllegalArgumentException(
          "a refund of " + cumulativeRefund + " of a charge of " + charge.cost());
    if (charge.cost() == 0) return 0;
    // Amounts reach 10^18 µ€, so the product does not fit a long.
    return BigInteger.valueOf(cumulativeRefund)
        .multiply(BigInteger.valueOf(charge.provider()))
        .divide(BigInteger.valueOf(charge.cost()))
        .longValueExact();
  }
}
