package dev.tickmark.agent.ssh;

import java.util.Locale;
import java.util.Set;
import org.apache.sshd.common.session.Session;
import org.apache.sshd.common.util.net.SshdSocketAddress;
import org.apache.sshd.server.forward.ForwardingFilter;

/**
 * Forwarding: local ({@code direct-tcpip}, {@code ssh -L 8888:localhost:8888}) to a loopback
 * address only: for process-runtime rentals the host's loopback (where their servers listen); for
 * sandboxed and docker ones only a {@link NamespaceBridge} into the rental's own loopback ({@link
 * NamespaceTcpip} makes the request one), never a port of the host. No remote forwarding ({@code
 * ssh -R}), no agent or X11 forwarding.
 */
final class LoopbackForwarding implements ForwardingFilter {
  static final Set<String> LOOPBACK = Set.of("localhost", "127.0.0.1", "::1", "0:0:0:0:0:0:0:1");

  private final RentalRegistry registry;

  LoopbackForwarding(RentalRegistry registry) {
    this.registry = registry;
  }

  @Override
  public boolean canConnect(Type type, SshdSocketAddress address, Session session) {
    if (type != Type.Direct || address == null || address.getHostName() == null) return false;
    if (!LOOPBACK.contains(address.getHostName().toLowerCase(Locale.ROOT))) return false;
    return registry
        .get(session.getAttribute(AgentSshServer.RENTAL))
        .map(
            e ->
                e.workspace() instanceof Workspace.Local
                    || ((e.workspace() instanceof Workspace.Sandboxed
                            || e.workspace() instanceof Workspace.Container)
                        && "127.0.0.1".equals(address.getHostName())
                        && NamespaceBridge.isOpen(address.getPort())))
        .orElse(false);
  }

  @Override
  public boolean canListen(SshdSocketAddress address, Session session) {
    return false;
  }

  @Override
  public boolean canForwardAgent(Session session, String requestType) {
    return false;
  }

  @Override
  public boolean canForwardX11(Session session, String requestType) {
    return false;
  }
}
