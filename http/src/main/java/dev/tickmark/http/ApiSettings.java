package dev.tickmark.http;

import java.time.Duration;

/**
 * What the HTTP edge needs to know that is not a collaborator. Secrets never appear in {@link #toString()}.
 *
 * @param readYourWritesWait how long a list waits for its projection to apply the writes made before it
 */
public record ApiSettings(
    String interfaceName, int port, Duration askTimeout, String operatorToken, String webhookSecret, Duration webhookTolerance,
    dev.tickmark.http.agent.AgentSession.Limits agentLimits, Duration registrationTokenValidity, PayoutDebtor payoutDebtor,
    Duration readYourWritesWait) {

  /** The operator's bank account payouts are paid from, named in the pain.001 export. Not a secret, but not logged either. */
  public record PayoutDebtor(String name, String iban, String bic) {}

  @Override
  public String toString() {
    return "ApiSettings[interface=" + interfaceName + ", port=" + port + ", askTimeout=" + askTimeout + "]";
  }
}
