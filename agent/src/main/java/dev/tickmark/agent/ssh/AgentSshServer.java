package dev.tickmark.agent.ssh;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.file.Path;
import java.security.KeyPair;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.sshd.common.AttributeRepository;
import org.apache.sshd.common.file.virtualfs.VirtualFileSystemFactory;
import org.apache.sshd.common.keyprovider.KeyPairProvider;
import org.apache.sshd.common.session.Session;
import org.apache.sshd.common.session.SessionContext;
import org.apache.sshd.common.session.SessionListener;
import org.apache.sshd.core.CoreModuleProperties;
import org.apache.sshd.scp.server.ScpCommandFactory;
import org.apache.sshd.server.SshServer;
import org.apache.sshd.server.auth.pubkey.UserAuthPublicKeyFactory;
import org.apache.sshd.sftp.server.SftpSubsystemFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The agent's SSH server (Apache MINA SSHD), one per agent, listening on {@code 127.0.0.1} only, on
 * a port the system picks: nothing reaches it from outside the host. Renters reach it through the
 * engine: each {@code open_stream} becomes a loopback connection made by {@link SshStreams}, whose
 * local port says which rental it is for ({@link RentalRegistry#bindPort}); a connection from a
 * port no stream registered is closed at once.
 *
 * <ul>
 *   <li>Authentication: public key only ({@link KeyAuthenticator}); any user name.
 *   <li>{@code shell} (with or without a pseudo-terminal), {@code exec} with its exit status,
 *       {@code sftp} and legacy {@code scp} rooted at the rental's scratch folder, local port
 *       forwarding to loopback ({@link LoopbackForwarding}; into the rental's own network namespace
 *       for sandboxed and docker rentals, {@link NamespaceTcpip}). Sessions run as the workload:
 *       see {@link SessionCommands}.
 *   <li>Idle sessions are closed after the idle timeout (default {@link #DEFAULT_IDLE_TIMEOUT}).
 * </ul>
 */
public final class AgentSshServer implements AutoCloseable {
  public static final Duration DEFAULT_IDLE_TIMEOUT = Duration.ofMinutes(30);

  /** The rental a session is for, set when it is created. */
  static final AttributeRepository.AttributeKey<String> RENTAL =
      new AttributeRepository.AttributeKey<>();

  private static final Logger log = LoggerFactory.getLogger(AgentSshServer.class);

  private final SshServer sshd;
  private final RentalRegistry registry;
  private final String hostKey;
  private final ExecutorService threads;

  private AgentSshServer(
      SshServer sshd, RentalRegistry registry, String hostKey, ExecutorService threads) {
    this.sshd = sshd;
    this.registry = registry;
    this.hostKey = hostKey;
    this.threads = threads;
  }

  /**
   * Starts the server with the host key of {@code stateDir} (created there on first use).
   *
   * @throws IOException when the key cannot be read or written, or the server cannot listen
   */
  public static AgentSshServer start(Path stateDir, RentalRegistry registry, Duration idleTimeout)
      throws IOException {
    KeyPair key = HostKey.loadOrCreate(stateDir);
    ExecutorService threads =
        Executors.newCachedThreadPool(
            r -> {
              Thread t = new Thread(r, "tickmark-agent-ssh-session");
              t.setDaemon(true);
              return t;
            });
    SessionCommands commands = new SessionCommands();
    WorkloadCommand.Launcher launcher =
        (channel, tty, term, command) -> {
          RentalRegistry.Entry e =
              registry
                  .get(channel.getSession().getAttribute(RENTAL))
                  .orElseThrow(() -> new IOException("the rental does not run any more"));
          return commands.launch(e.workspace(), tty, term, command);
        };

    SshServer sshd = SshServer.setUpDefaultServer();
    sshd.setHost("127.0.0.1"); // loopback only, never a wildcard address
    sshd.setPort(0);
    sshd.setKeyPairProvider(KeyPairProvider.wrap(key));
    sshd.setUserAuthFactories(List.of(UserAuthPublicKeyFactory.INSTANCE));
    sshd.setPublickeyAuthenticator(new KeyAuthenticator(registry));
    sshd.setPasswordAuthenticator(null);
    sshd.setKeyboardInteractiveAuthenticator(null);
    sshd.setGSSAuthenticator(null);
    sshd.setHostBasedAuthenticator(null);
    sshd.setChannelFactories(
        List.of(new WorkloadChannel.Factory(), new NamespaceTcpip.Factory(registry, threads)));
    sshd.setForwardingFilter(new LoopbackForwarding(registry));
    sshd.setShellFactory(channel -> new WorkloadCommand(null, launcher, threads));
    sshd.setCommandFactory(
        new ScpCommandFactory.Builder()
            .withDelegate((channel, command) -> new WorkloadCommand(command, launcher, threads))
            .build());
    sshd.setSubsystemFactories(List.of(new SftpSubsystemFactory.Builder().build()));
    sshd.setFileSystemFactory(new RentalFiles(registry));
    CoreModuleProperties.IDLE_TIMEOUT.set(sshd, idleTimeout);
    sshd.addSessionListener(new Sessions(registry));
    try {
      sshd.start();
    } catch (IOException | RuntimeException e) {
      threads.shutdownNow();
      throw e;
    }
    AgentSshServer server =
        new AgentSshServer(sshd, registry, HostKey.openSshLine(key.getPublic()), threads);
    log.info("ssh server listening on {} (loopback only)", server.address());
    return server;
  }

  /** The address it listens on (a {@code 127.0.0.1} one). */
  public InetSocketAddress address() {
    for (SocketAddress a : sshd.getBoundAddresses()) if (a instanceof InetSocketAddress i) return i;
    return new InetSocketAddress("127.0.0.1", sshd.getPort());
  }

  /** The host key's public half, one OpenSSH line ({@code ssh-ed25519 AAAA…}). */
  public String hostKey() {
    return hostKey;
  }

  public RentalRegistry registry() {
    return registry;
  }

  /** The SSH sessions open now (for tests and logs). */
  public int sessionCount() {
    return sshd.getActiveSessions().size();
  }

  /** Closes every session (their processes are ended) and stops listening. */
  @Override
  public void close() {
    try {
      sshd.stop(true);
    } catch (IOException e) {
      log.warn("stopping the ssh server: {}", e.toString());
    }
    threads.shutdown();
  }

  /** Ties each session to the rental of its client port, or closes it. */
  private static final class Sessions implements SessionListener {
    private final RentalRegistry registry;

    Sessions(RentalRegistry registry) {
      this.registry = registry;
    }

    @Override
    public void sessionCreated(Session session) {
      String rental = null;
      if (session.getIoSession().getRemoteAddress() instanceof InetSocketAddress a
          && a.getAddress() != null
          && a.getAddress().isLoopbackAddress()) rental = registry.rentalOfPort(a.getPort());
      if (rental != null) session.setAttribute(RENTAL, rental);
      if (rental == null || !registry.addSession(rental, session)) {
        log.warn(
            "ssh: closing a connection that no stream opened ({})",
            session.getIoSession().getRemoteAddress());
        session.close(true);
      }
    }

    @Override
    public void sessionClosed(Session session) {
      String rental = session.getAttribute(RENTAL);
      if (rental != null) registry.removeSession(rental, session);
    }
  }

  /** SFTP and SCP see the rental's scratch folder as their root. */
  private static final class RentalFiles extends VirtualFileSystemFactory {
    private final RentalRegistry registry;

    RentalFiles(RentalRegistry registry) {
      this.registry = registry;
    }

    @Override
    public Path getUserHomeDir(SessionContext session) throws IOException {
      return registry
          .get(session.getAttribute(RENTAL))
          .map(e -> e.workspace().files())
          .orElseThrow(() -> new IOException("the rental does not run any more"));
    }
  }
}
