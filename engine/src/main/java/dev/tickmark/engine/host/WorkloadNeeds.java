package dev.tickmark.engine.host;

import dev.tickmark.engine.host.verification.Verification;

/**
 * What a rental needs of the runtime its host runs it in, beyond cards and a price: outbound {@code
 * network}, and a {@code runtime} by name (null: any). A renter asks for {@code docker} to have
 * their image run: the {@code sandbox} and {@code process} runtimes run the command on the host's
 * own system. One rule for the host, which refuses a proposal it cannot run, and for the matcher,
 * whose read side is asked only for hosts that can.
 */
public record WorkloadNeeds(boolean network, String runtime) {
  /** A rental without network that runs anywhere. */
  public static final WorkloadNeeds ANY = new WorkloadNeeds(false, null);

  /**
   * Null when a host whose latest passed report said {@code reported} can run the rental; else why
   * not. {@code reported} null: the host's agent did not say (it predates the report's runtime), so
   * network is taken as possible, as before, but a runtime asked for by name is not.
   */
  public String refusal(Verification.WorkloadRuntime reported) {
    if (network && reported != null && !reported.network())
      return "the host cannot give a rental outbound network";
    if (runtime != null && (reported == null || !runtime.equals(reported.name())))
      return "the host does not run rentals in " + runtime;
    return null;
  }

  /** Whether {@code name} is a runtime a renter may ask for. */
  public static boolean known(String name) {
    return Verification.RUNTIMES.contains(name);
  }
}
