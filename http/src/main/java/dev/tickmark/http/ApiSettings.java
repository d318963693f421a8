package dev.tickmark.http;

import com.typesafe.config.Config;
import dev.tickmark.engine.account.Iban;
import dev.tickmark.http.agent.AgentSession;
import dev.tickmark.http.agent.FailedAuthThrottle;
import java.time.Duration;
import java.util.Locale;

/**
 * What the HTTP edge needs to know that is not a collaborator. Secrets never appear in {@link
 * #toString()}.
 *
 * @param operatorTokens each operator's name and token (name: what the audit log records)
 * @param readYourWritesWait how long a list waits for its projection to apply the writes made
 *     before it
 */
public record ApiSettings(
    String interfaceName,
    int port,
    Duration askTimeout,
    java.util.Map<String, String> operatorTokens,
    String webhookSecret,
    Duration webhookTolerance,
    AgentSession.Limits agentLimits,
    FailedAuthThrottle.Settings agentAuthThrottle,
    Duration registrationTokenValidity,
    PayoutDebtor payoutDebtor,
    Duration readYourWritesWait,
    StreamLimits.Settings streams,
    RateLimits.Settings rateLimits) {

  /** The name a lone {@code TICKMARK_OPERATOR_TOKEN} is recorded under in the audit log. */
  public static final String DEFAULT_OPERATOR = "operator";

  /** With one operator token, named {@link #DEFAULT_OPERATOR}. */
  public static ApiSettings fromConfig(
      Config config, int port, String operatorToken, String webhookSecret) {
    return fromConfig(
        config, port, java.util.Map.of(DEFAULT_OPERATOR, operatorToken), webhookSecret);
  }

  /**
   * From the node's config ({@code tickmark.http.*}, {@code tickmark.payments.tolerance}, the agent
   * socket's limits, {@code tickmark.hosts.registration-token-validity}, {@code
   * tickmark.payouts.debtor}, {@code tickmark.http.rate-limits}); the port and the secrets are the
   * node's, from its environment.
   */
  public static ApiSettings fromConfig(
      Config config, int port, java.util.Map<String, String> operatorTokens, String webhookSecret) {
    Config http = config.getConfig("tickmark.http");
    return new ApiSettings(
        http.getString("interface"),
        port,
        http.getDuration("ask-timeout"),
        java.util.Map.copyOf(operatorTokens),
        webhookSecret,
        config.getDuration("tickmark.payments.tolerance"),
        AgentSession.Limits.fromConfig(config),
        FailedAuthThrottle.Settings.fromConfig(config),
        config.getDuration("tickmark.hosts.registration-token-validity"),
        PayoutDebtor.fromConfig(config.getConfig("tickmark.payouts.debtor")),
        http.getDuration("read-your-writes-wait"),
        StreamLimits.Settings.fromConfig(config),
        RateLimits.Settings.fromConfig(config));
  }

  /**
   * The operator's bank account payouts are paid from, named in the pain.001 export. Not a secret,
   * but not logged either.
   */
  public record PayoutDebtor(String name, String iban, String bic) {
    /**
     * {@code tickmark.payouts.debtor}, checked at start: a typo in the IBAN must not wait for the
     * first export to show.
     */
    public static PayoutDebtor fromConfig(Config c) {
      String name = c.getString("name").strip();
      String iban = c.getString("iban").isBlank() ? null : Iban.normalize(c.getString("iban"));
      String bic =
          c.getString("bic").isBlank() ? null : c.getString("bic").strip().toUpperCase(Locale.ROOT);
      if (iban != null && Iban.problem(iban).isPresent()) {
        throw new IllegalArgumentException(
            "tickmark.payouts.debtor.iban (TICKMARK_PAYOUT_DEBTOR_IBAN) is not a SEPA IBAN: "
                + Iban.problem(iban).get());
      }
      if (bic != null && !Iban.isValidBic(bic)) {
        throw new IllegalArgumentException(
            "tickmark.payouts.debtor.bic (TICKMARK_PAYOUT_DEBTOR_BIC) is not a BIC");
      }
      if (iban != null && name.isEmpty()) {
        throw new IllegalArgumentException(
            "tickmark.payouts.debtor.name (TICKMARK_PAYOUT_DEBTOR_NAME) is required with an IBAN");
      }
      return new PayoutDebtor(name.isEmpty() ? null : name, iban, bic);
    }
  }

  @Override
  public String toString() {
    return "ApiSettings[interface="
        + interfaceName
        + ", port="
        + port
        + ", askTimeout="
        + askTimeout
        + "]";
  }
}
