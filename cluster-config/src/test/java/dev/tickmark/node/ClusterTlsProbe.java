package dev.tickmark.node;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;

/**
 * TLS handshakes against a cluster's TLS, as a client with some context: a loopback server socket
 * with a node's context and its server rules, or a node's real remoting port.
 */
final class ClusterTlsProbe {
  private ClusterTlsProbe() {}

  /** What became of a connection. */
  enum Outcome {
    /** The handshake completed and the server kept the connection (or sent data over it). */
    OPEN,
    /** A TLS alert or the connection closed: the handshake, or the session, was refused. */
    REFUSED
  }

  /**
   * A handshake between {@code server} (as a node accepts remoting connections: client certificate
   * required, TLS 1.3) and a client with {@code client}; the server sends one byte once it is done.
   */
  static Outcome handshake(ClusterTls server, SSLContext client) throws Exception {
    try (SSLServerSocket listener =
        (SSLServerSocket) server.context().getServerSocketFactory().createServerSocket(0)) {
      listener.setNeedClientAuth(true);
      listener.setEnabledProtocols(new String[] {ClusterTls.PROTOCOL});
      CompletableFuture<Void> accepted =
          CompletableFuture.runAsync(
              () -> {
                try (SSLSocket s = (SSLSocket) listener.accept()) {
                  s.setSoTimeout(10_000);
                  s.startHandshake();
                  s.getOutputStream().write(1);
                  s.getOutputStream().flush();
                } catch (IOException e) {
                  // the client sees the alert or the close
                }
              });
      try {
        return handshake(
            client,
            new InetSocketAddress("127.0.0.1", listener.getLocalPort()),
            Duration.ofSeconds(10));
      } finally {
        accepted.get(15, TimeUnit.SECONDS);
      }
    }
  }

  /**
   * A handshake with {@code address} as a client with {@code client}, then a read: in TLS 1.3 a
   * server refuses the client's certificate only after the client's side of the handshake is done,
   * so the refusal arrives as the first read's alert. A server that says nothing for {@code quiet}
   * kept the connection ({@link Outcome#OPEN}): a node's remoting port waits for the client to
   * speak first.
   */
  static Outcome handshake(SSLContext client, InetSocketAddress address, Duration quiet)
      throws IOException {
    try (SSLSocket socket = (SSLSocket) client.getSocketFactory().createSocket()) {
      socket.connect(address, 5_000);
      socket.setSoTimeout((int) quiet.toMillis());
      socket.setEnabledProtocols(new String[] {ClusterTls.PROTOCOL});
      try {
        socket.startHandshake();
        return socket.getInputStream().read() < 0 ? Outcome.REFUSED : Outcome.OPEN;
      } catch (SocketTimeoutException stillOpen) {
        return Outcome.OPEN;
      } catch (SSLException | EOFException | SocketException refused) {
        return Outcome.REFUSED;
      }
    }
  }

  /**
   * Plain TCP to {@code address}, starting as Pekko's plain remoting does (its "AKKA" magic and a
   * stream id): what the server answered before it closed, or null when it said nothing for {@code
   * quiet} and kept the connection (as a plain remoting port would).
   */
  static byte[] plainHello(InetSocketAddress address, Duration quiet) throws IOException {
    try (Socket socket = new Socket()) {
      socket.connect(address, 5_000);
      socket.setSoTimeout((int) quiet.toMillis());
      socket.getOutputStream().write("AKKA".getBytes(StandardCharsets.US_ASCII));
      socket.getOutputStream().write(1);
      socket.getOutputStream().flush();
      try {
        return socket.getInputStream().readAllBytes();
      } catch (SocketTimeoutException stillOpen) {
        return null;
      } catch (SocketException reset) {
        return new byte[0];
      }
    }
  }

  /** A client context that trusts {@code caFile} and has no certificate of its own. */
  static SSLContext trustingOnly(Path caFile) throws Exception {
    KeyStore trusted = KeyStore.getInstance("PKCS12");
    trusted.load(null, null);
    try (InputStream in = Files.newInputStream(caFile)) {
      trusted.setCertificateEntry(
          "ca", CertificateFactory.getInstance("X.509").generateCertificate(in));
    }
    TrustManagerFactory factory = TrustManagerFactory.getInstance("PKIX");
    factory.init(trusted);
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(null, factory.getTrustManagers(), null);
    return context;
  }
}
