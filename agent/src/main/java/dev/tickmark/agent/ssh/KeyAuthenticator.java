package dev.tickmark.agent.ssh;

import java.security.PublicKey;
import org.apache.sshd.common.config.keys.KeyUtils;
import org.apache.sshd.server.auth.pubkey.PublickeyAuthenticator;
import org.apache.sshd.server.session.ServerSession;

/**
 * Public key authentication, the only kind offered: a key is accepted when it is one of the
 * authorized keys of the session's rental (its {@code start_rental.ssh_public_key}), and the rental
 * still runs. The user name is not looked at: every session of a rental runs as its workload, so
 * {@code ssh anything@…} is as good as {@code ssh root@…}.
 */
final class KeyAuthenticator implements PublickeyAuthenticator {
  private final RentalRegistry registry;

  KeyAuthenticator(RentalRegistry registry) {
    this.registry = registry;
  }

  @Override
  public boolean authenticate(String username, PublicKey key, ServerSession session) {
    String rental = session.getAttribute(AgentSshServer.RENTAL);
    return registry
        .get(rental)
        .map(e -> e.keys().stream().anyMatch(k -> KeyUtils.compareKeys(k, key)))
        .orElse(false);
  }
}
