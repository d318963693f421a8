package dev.tickmark.agent.ssh;

import java.io.IOException;
import java.util.Locale;
import java.util.concurrent.Executor;
import org.apache.sshd.client.future.DefaultOpenFuture;
import org.apache.sshd.client.future.OpenFuture;
import org.apache.sshd.common.SshConstants;
import org.apache.sshd.common.channel.Channel;
import org.apache.sshd.common.channel.exception.SshChannelOpenException;
import org.apache.sshd.common.session.Session;
import org.apache.sshd.common.util.buffer.Buffer;
import org.apache.sshd.common.util.buffer.ByteArrayBuffer;
import org.apache.sshd.server.forward.TcpForwardingFilter;
import org.apache.sshd.server.forward.TcpipServerChannel;

/**
 * {@code direct-tcpip} ({@code ssh -L}) that reaches a rental's own loopback where it has a network
 * namespace of its own (a sandbox, a docker container): for such a rental, a request for {@code
 * localhost:PORT} becomes a connection to a {@link NamespaceBridge} whose helper ({@link
 * Workspace.Relay}) connects to {@code PORT} inside that namespace; a container on a host with no
 * helper is refused. For a process-runtime rental it is MINA's own channel, unchanged. {@link
 * LoopbackForwarding} still decides what is allowed.
 */
final class NamespaceTcpip extends TcpipServerChannel {
  private final RentalRegistry registry;
  private final Executor threads;

  NamespaceTcpip(RentalRegistry registry, Executor threads) {
    super(TcpForwardingFilter.Type.Direct, null);
    this.registry = registry;
    this.threads = threads;
  }

  @Override
  protected OpenFuture doInit(Buffer buffer) {
    String host = buffer.getString();
    int port = buffer.getInt();
    String originHost = buffer.getString();
    int originPort = buffer.getInt();
    Workspace workspace =
        registry
            .get(getSession().getAttribute(AgentSshServer.RENTAL))
            .map(RentalRegistry.Entry::workspace)
            .orElse(null);
    Workspace.Relay relay =
        workspace instanceof Workspace.Sandboxed s
            ? s.relay()
            : workspace instanceof Workspace.Container c ? c.relay() : null;
    if (workspace instanceof Workspace.Container && relay == null) return refuse();
    if (relay != null) {
      String h = host == null ? "" : host.toLowerCase(Locale.ROOT);
      if (!LoopbackForwarding.LOOPBACK.contains(h) || port < 1 || port > 65535) return refuse();
      boolean ipv6 = h.contains(":");
      try {
        port = NamespaceBridge.open(relay.command(ipv6, port), threads);
      } catch (IOException e) {
        log.warn("cannot open a bridge into the rental's network: {}", e.toString());
        return refuse();
      }
      host = "127.0.0.1";
    }
    Buffer rewritten = new ByteArrayBuffer();
    rewritten.putString(host);
    rewritten.putInt(port);
    rewritten.putString(originHost);
    rewritten.putInt(originPort);
    return super.doInit(rewritten);
  }

  private OpenFuture refuse() {
    OpenFuture f = new DefaultOpenFuture(this, this);
    try {
      f.setException(
          new SshChannelOpenException(
              getChannelId(),
              SshConstants.SSH_OPEN_ADMINISTRATIVELY_PROHIBITED,
              "Connection denied"));
    } finally {
      close(true);
    }
    return f;
  }

  static final class Factory extends TcpipServerChannel.TcpipFactory {
    private final RentalRegistry registry;
    private final Executor threads;

    Factory(RentalRegistry registry, Executor threads) {
      super(TcpForwardingFilter.Type.Direct);
      this.registry = registry;
      this.threads = threads;
    }

    @Override
    public Channel createChannel(Session session) {
      return new NamespaceTcpip(registry, threads);
    }
  }
}
