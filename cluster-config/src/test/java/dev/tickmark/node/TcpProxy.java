package dev.tickmark.node;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP forwarder from a local port to a node's, so that a test can cut an agent's connection
 * ({@link #dropConnections()}) and watch it reconnect, without touching the agent or the node; or
 * from an address of a test's own network (a bridge) to a server on loopback, so that processes in
 * network namespaces reach it.
 */
final class TcpProxy implements AutoCloseable {
  private final ServerSocket server;
  private final InetAddress targetHost;
  private final int target;
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  private final AtomicInteger accepted = new AtomicInteger();

  TcpProxy(int targetPort) throws IOException {
    this(InetAddress.getLoopbackAddress(), InetAddress.getLoopbackAddress(), targetPort);
  }

  /** Listens on a free port of {@code bind} and forwards to {@code targetHost:targetPort}. */
  TcpProxy(InetAddress bind, InetAddress targetHost, int targetPort) throws IOException {
    this.targetHost = targetHost;
    this.target = targetPort;
    this.server = new ServerSocket(0, 200, bind);
    Thread acceptor = new Thread(this::accept, "tcp-proxy");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  int port() {
    return server.getLocalPort();
  }

  /** How many connections were made through this proxy so far. */
  int connectionsAccepted() {
    return accepted.get();
  }

  private void accept() {
    while (!server.isClosed()) {
      try {
        Socket in = server.accept();
        accepted.incrementAndGet();
        Socket out = new Socket(targetHost, target);
        sockets.add(in);
        sockets.add(out);
        pump(in, out);
        pump(out, in);
      } catch (IOException e) {
        // closed
      }
    }
  }

  private void pump(Socket from, Socket to) {
    Thread t =
        new Thread(
            () -> {
              byte[] buf = new byte[16384];
              try (InputStream in = from.getInputStream();
                  OutputStream out = to.getOutputStream()) {
                int n;
                while ((n = in.read(buf)) >= 0) {
                  out.write(buf, 0, n);
                  out.flush();
                }
              } catch (IOException e) {
                // dropped
              } finally {
                close(from);
                close(to);
              }
            },
            "tcp-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  /** Cuts every connection made so far (without a close handshake). */
  void dropConnections() {
    for (Socket s : sockets) close(s);
    sockets.clear();
  }

  private static void close(Socket s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // already closed
    }
  }

  @Override
  public void close() throws IOException {
    server.close();
    dropConnections();
  }
}
