package dev.tickmark.agent.ssh;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A one-connection loopback port on the host that leads into a rental's network namespace (a
 * sandbox's, a docker container's): the first connection it accepts is piped to a helper process
 * ({@link Workspace.Relay}) that runs in that namespace, connected there to the forwarded port. The
 * SSH server's forwarding code connects to this port as it connects to any loopback port, so flow
 * control and closing stay MINA's.
 *
 * <p>It stops listening after that connection, or after {@link #ACCEPT_TIMEOUT_MS}. Until then a
 * process of the host could connect first: the host is the provider's, and those processes could
 * enter the rental's namespaces anyway.
 */
final class NamespaceBridge {
  static final int ACCEPT_TIMEOUT_MS = 10_000;

  private static final Logger log = LoggerFactory.getLogger(NamespaceBridge.class);

  /** The bridge ports listening now: the only loopback ports a sandboxed rental may forward to. */
  private static final Set<Integer> OPEN = ConcurrentHashMap.newKeySet();

  private NamespaceBridge() {}

  static boolean isOpen(int port) {
    return OPEN.contains(port);
  }

  /** Listens on a new loopback port for one connection to pipe through {@code helper}. */
  static int open(List<String> helper, Executor threads) throws IOException {
    ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
    server.setSoTimeout(ACCEPT_TIMEOUT_MS);
    int port = server.getLocalPort();
    OPEN.add(port);
    threads.execute(
        () -> {
          Socket socket;
          try (server) {
            socket = server.accept();
          } catch (IOException e) {
            log.debug("bridge {}: nothing connected: {}", port, e.toString());
            return;
          } finally {
            OPEN.remove(port);
          }
          pipe(socket, helper, threads);
        });
    return port;
  }

  private static void pipe(Socket socket, List<String> helper, Executor threads) {
    Process p;
    try {
      p = new ProcessBuilder(helper).redirectError(ProcessBuilder.Redirect.DISCARD).start();
    } catch (IOException e) {
      log.warn("cannot start the forwarding helper {}: {}", helper.get(0), e.toString());
      close(socket);
      return;
    }
    threads.execute(
        () -> {
          try {
            copy(socket.getInputStream(), p.getOutputStream());
          } catch (IOException e) {
            // either side closed
          } finally {
            try {
              p.getOutputStream().close(); // the helper sees the end and half-closes its side
            } catch (IOException e) {
              // already gone
            }
          }
        });
    threads.execute(
        () -> {
          try {
            copy(p.getInputStream(), socket.getOutputStream());
          } catch (IOException e) {
            // either side closed
          } finally {
            close(socket);
            p.destroy();
          }
        });
  }

  private static void copy(InputStream in, OutputStream out) throws IOException {
    byte[] buf = new byte[32 * 1024];
    for (int n; (n = in.read(buf)) >= 0; ) {
      out.write(buf, 0, n);
      out.flush();
    }
  }

  private static void close(Socket s) {
    try {
      s.close();
    } catch (IOException e) {
      // already closed
    }
  }
}
