package dev.tickmark.agent;

import dev.tickmark.wire.AgentFrame;
import dev.tickmark.wire.CanonicalJson;
import dev.tickmark.wire.Ed25519;
import dev.tickmark.wire.Frames;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A stand-in for a node's agent endpoint, just enough RFC 6455 (unfragmented frames, ping/pong,
 * close) and just enough of the protocol (tokens, credentials, key pinning, signatures) to drive a
 * real {@link Agent} over a real socket. It is a test double of the node, not of anything in the
 * agent: the frames and signatures are checked with the wire module as the node will check them.
 */
final class ScriptedNode implements AutoCloseable {
  private static final String WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

  /** A frame the node received, with the connection it came on. */
  record Received(int connection, AgentFrame frame) {}

  private final ServerSocket server;
  private final Thread acceptor;
  private final AtomicInteger connections = new AtomicInteger();
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  final BlockingQueue<Received> received = new LinkedBlockingQueue<>();
  final List<String> authorizations = new CopyOnWriteArrayList<>();
  final List<String> paths = new CopyOnWriteArrayList<>();

  // the node's "database", shared by tests that use two nodes
  final Map<String, String> unusedTokens;
  final Set<String> usedTokens;
  final Map<String, String> credentials; // credential -> host id
  final Map<String, String> pinnedKeys; // host id -> public key
  volatile String rejectUpgradeWithCode; // answer 401 {code} instead of upgrading
  volatile int heartbeatIntervalS = 1;
  private volatile Conversation latest;

  // ssh streams: a renter's TCP connection waits here for the agent's stream websocket
  private final Map<String, Socket> waitingRenters = new ConcurrentHashMap<>();
  private final List<ServerSocket> renterEndpoints = new CopyOnWriteArrayList<>();
  private final AtomicInteger streamIds = new AtomicInteger();

  /** The engine's snapshot endpoints: plain HTTP requests on the same port. */
  final SnapshotStore snapshots = new SnapshotStore();

  /** Stream websockets the agent opened (their stream ids), in order. */
  final List<String> streamsOpened = new CopyOnWriteArrayList<>();

  ScriptedNode() throws IOException {
    this(
        new ConcurrentHashMap<>(),
        ConcurrentHashMap.newKeySet(),
        new ConcurrentHashMap<>(),
        new ConcurrentHashMap<>());
  }

  /** A second node of the same cluster: same tokens, credentials and keys. */
  ScriptedNode sibling() throws IOException {
    return new ScriptedNode(unusedTokens, usedTokens, credentials, pinnedKeys);
  }

  private ScriptedNode(
      Map<String, String> unusedTokens,
      Set<String> usedTokens,
      Map<String, String> credentials,
      Map<String, String> pinnedKeys)
      throws IOException {
    this.unusedTokens = unusedTokens;
    this.usedTokens = usedTokens;
    this.credentials = credentials;
    this.pinnedKeys = pinnedKeys;
    server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    acceptor = new Thread(this::acceptLoop, "scripted-node-" + server.getLocalPort());
    acceptor.setDaemon(true);
    acceptor.start();
  }

  String url() {
    return "ws://127.0.0.1:" + server.getLocalPort();
  }

  URI uri() {
    return URI.create(url());
  }

  String newToken(String hostId) {
    String token = "tmkreg_" + hostId + "_s3cret" + unusedTokens.size();
    unusedTokens.put(token, hostId);
    return token;
  }

  /** Sends a frame to the agent on the latest connection (e.g. {@code start_rental}). */
  void send(AgentFrame frame) throws IOException {
    Conversation c = latest;
    if (c == null) throw new IllegalStateException("no agent connected");
    c.send(frame);
  }

  int connectionCount() {
    return connections.get();
  }

  /** Drops every open connection abruptly (a node crash, from the agent's side). */
  void dropConnections() throws IOException {
    for (Socket s : sockets) s.close();
  }

  @Override
  public void close() throws IOException {
    server.close();
    for (ServerSocket s : renterEndpoints) s.close();
    for (Socket s : waitingRenters.values()) s.close();
    dropConnections();
  }

  /**
   * What {@code GET /v1/rentals/{id}/connect} is to a renter, as a plain TCP port on loopback: each
   * connection to it becomes an {@code open_stream} to the agent, and once the agent has opened the
   * stream websocket the connection's bytes are relayed over it (binary frames both ways). So
   * {@code ssh -p <port> 127.0.0.1} reaches the agent's SSH server the way a renter would. A
   * connection whose stream the agent refuses is closed.
   */
  int renterEndpoint(String rentalId) throws IOException {
    ServerSocket endpoint = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    renterEndpoints.add(endpoint);
    Thread t =
        new Thread(
            () -> {
              while (!endpoint.isClosed()) {
                try {
                  Socket renter = endpoint.accept();
                  String streamId = "st_" + streamIds.incrementAndGet();
                  waitingRenters.put(streamId, renter);
                  send(new AgentFrame.OpenStream(streamId, rentalId));
                } catch (IOException e) {
                  return;
                }
              }
            },
            "scripted-node-renters");
    t.setDaemon(true);
    t.start();
    return endpoint.getLocalPort();
  }

  private void acceptLoop() {
    while (!server.isClosed()) {
      try {
        Socket socket = server.accept();
        sockets.add(socket);
        Thread t = new Thread(() -> serve(socket), "scripted-node-conn");
        t.setDaemon(true);
        t.start();
      } catch (IOException e) {
        return;
      }
    }
  }

  private void serve(Socket socket) {
    try (socket) {
      InputStream in = socket.getInputStream();
      OutputStream out = socket.getOutputStream();
      Map<String, String> headers = new HashMap<>();
      String requestLine = readLine(in);
      for (String line = readLine(in); !line.isEmpty(); line = readLine(in)) {
        int colon = line.indexOf(':');
        headers.put(
            line.substring(0, colon).trim().toLowerCase(Locale.ROOT),
            line.substring(colon + 1).trim());
      }
      paths.add(requestLine.split(" ")[1]);
      String auth = headers.getOrDefault("authorization", "");
      authorizations.add(auth);
      String bearer = auth.startsWith("Bearer ") ? auth.substring(7) : "";
      if (!"websocket".equalsIgnoreCase(headers.getOrDefault("upgrade", ""))) {
        serveHttp(requestLine, headers, bearer, in, out);
        return;
      }
      String code = rejectUpgradeWithCode;
      if (code == null
          && !unusedTokens.containsKey(bearer)
          && !usedTokens.contains(bearer)
          && !credentials.containsKey(bearer)) {
        code = "unauthorized";
      }
      if (code != null) {
        byte[] body =
            ("{\"type\":\"about:blank\",\"title\":\"Unauthorized\",\"status\":401,\"code\":\""
                    + code
                    + "\",\"detail\":\"refused by the scripted node\"}")
                .getBytes(StandardCharsets.UTF_8);
        out.write(
            ("HTTP/1.1 401 Unauthorized\r\nContent-Type: application/problem+json\r\nContent-Length: "
                    + body.length
                    + "\r\nConnection: close\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII));
        out.write(body);
        out.flush();
        return;
      }
      String accept =
          Base64.getEncoder()
              .encodeToString(
                  MessageDigest.getInstance("SHA-1")
                      .digest(
                          (headers.get("sec-websocket-key") + WS_GUID)
                              .getBytes(StandardCharsets.US_ASCII)));
      out.write(
          ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "
                  + accept
                  + "\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      String path = requestLine.split(" ")[1];
      if (path.startsWith("/v1/agent/streams/")) {
        relayStream(path.substring("/v1/agent/streams/".length()), bearer, socket, in, out);
        return;
      }
      Conversation conversation = new Conversation(connections.incrementAndGet(), bearer, in, out);
      latest = conversation;
      conversation.run();
    } catch (Exception e) {
      // connection over
    }
  }

  /**
   * A plain HTTP/1.1 request (the snapshot endpoints), answered and then the connection closed.
   * Only a host credential may use them.
   */
  private void serveHttp(
      String requestLine,
      Map<String, String> headers,
      String bearer,
      InputStream in,
      OutputStream out)
      throws IOException, InterruptedException {
    String[] parts = requestLine.split(" ");
    int length = Integer.parseInt(headers.getOrDefault("content-length", "0"));
    byte[] body = new DataInputStream(in).readNBytes(length);
    SnapshotStore.Answer a;
    if (!credentials.containsKey(bearer)) {
      a = SnapshotStore.Answer.problem(401, "unauthorized");
    } else {
      try {
        a = snapshots.handle(parts[0], parts[1], body);
      } catch (SnapshotStore.Drop drop) {
        return; // the connection closes without an answer
      }
      if (a == null) a = SnapshotStore.Answer.problem(404, "not_found");
    }
    StringBuilder head = new StringBuilder("HTTP/1.1 ").append(a.status()).append(" Scripted\r\n");
    if (a.contentType() != null)
      head.append("Content-Type: ").append(a.contentType()).append("\r\n");
    if (a.status() != 204) head.append("Content-Length: ").append(a.body().length).append("\r\n");
    head.append("Connection: close\r\n\r\n");
    out.write(head.toString().getBytes(StandardCharsets.US_ASCII));
    if (a.status() != 204) out.write(a.body());
    out.flush();
  }

  /** One agent session, following docs/agent-protocol.md. */
  private final class Conversation {
    final int id;
    final String bearer;
    final DataInputStream in;
    final OutputStream out;
    final String nonce = Base64.getEncoder().encodeToString(new byte[] {1, 2, 3, 4, 5, 6, 7, 8});
    String hostId;
    String publicKey;

    Conversation(int id, String bearer, InputStream in, OutputStream out) {
      this.id = id;
      this.bearer = bearer;
      this.in = new DataInputStream(in);
      this.out = out;
    }

    void run() throws Exception {
      send(new AgentFrame.Challenge(nonce));
      while (true) {
        int b0 = in.readUnsignedByte();
        int b1 = in.readUnsignedByte();
        int opcode = b0 & 0x0f;
        long len = b1 & 0x7f;
        if (len == 126) len = in.readUnsignedShort();
        else if (len == 127) len = in.readLong();
        byte[] mask = new byte[4];
        if ((b1 & 0x80) != 0) in.readFully(mask);
        byte[] payload = new byte[(int) len];
        in.readFully(payload);
        for (int i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4];
        switch (opcode) {
          case 0x1 -> onText(new String(payload, StandardCharsets.UTF_8));
          case 0x8 -> {
            writeFrame(0x8, payload);
            return;
          }
          case 0x9 -> writeFrame(0xA, payload);
          default -> {}
        }
      }
    }

    void onText(String text) throws Exception {
      AgentFrame frame = Frames.read(text);
      received.add(new Received(id, frame));
      if (frame instanceof AgentFrame.CloseStream cs) {
        Socket renter = waitingRenters.remove(cs.streamId()); // refused: the renter is told so
        if (renter != null) renter.close();
      }
      if (frame instanceof AgentFrame.Hello h) {
        if (!Ed25519.verify(h.publicKey(), Ed25519.helloMessage(nonce), h.signature())) {
          fail("bad_signature", "hello signature does not verify");
          return;
        }
        if (credentials.containsKey(bearer)) {
          hostId = credentials.get(bearer);
          if (!h.publicKey().equals(pinnedKeys.get(hostId))) {
            fail("key_mismatch", "not the pinned key");
            return;
          }
          publicKey = h.publicKey();
          send(new AgentFrame.Welcome(hostId, null, heartbeatIntervalS));
        } else if (usedTokens.contains(bearer)) {
          fail("token_used", "registration token already used");
        } else {
          hostId = unusedTokens.remove(bearer);
          usedTokens.add(bearer);
          publicKey = h.publicKey();
          pinnedKeys.put(hostId, publicKey);
          String credential = "tmkhost_" + hostId + "_c" + credentials.size();
          credentials.put(credential, hostId);
          send(new AgentFrame.Welcome(hostId, credential, heartbeatIntervalS));
        }
      } else if (frame instanceof AgentFrame.HardwareReportFrame r) {
        boolean ok = Ed25519.verify(publicKey, CanonicalJson.bytes(r.report()), r.signature());
        Frames.readReport(r.report());
        send(
            new AgentFrame.VerificationResult(
                ok ? "verified" : "failed",
                List.of(new AgentFrame.Check("signature", ok ? "pass" : "fail", null, null))));
      }
    }

    void fail(String code, String message) throws IOException {
      send(new AgentFrame.Error(code, message));
      writeFrame(0x8, new byte[] {0x03, (byte) 0xE8});
    }

    synchronized void send(AgentFrame frame) throws IOException {
      writeFrame(0x1, Frames.write(frame).getBytes(StandardCharsets.UTF_8));
    }

    synchronized void writeFrame(int opcode, byte[] payload) throws IOException {
      ByteArrayOutputStream frame = new ByteArrayOutputStream();
      frame.write(0x80 | opcode);
      if (payload.length < 126) {
        frame.write(payload.length);
      } else if (payload.length < 65536) {
        frame.write(126);
        frame.write(payload.length >> 8);
        frame.write(payload.length & 0xff);
      } else {
        frame.write(127);
        for (int i = 7; i >= 0; i--) frame.write((int) ((long) payload.length >> (8 * i)) & 0xff);
      }
      frame.write(payload);
      out.write(frame.toByteArray());
      out.flush();
    }
  }

  /** A stream websocket from the agent: relays it to the renter's connection waiting for it. */
  private void relayStream(
      String streamId, String bearer, Socket socket, InputStream in, OutputStream out)
      throws IOException {
    Socket renter = waitingRenters.remove(streamId);
    if (renter == null || !credentials.containsKey(bearer)) {
      out.write("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".getBytes());
      out.flush();
      return;
    }
    streamsOpened.add(streamId);
    Object sending = new Object();
    Thread up =
        new Thread(
            () -> {
              byte[] buf = new byte[16 * 1024];
              try (renter) {
                InputStream r = renter.getInputStream();
                for (int n; (n = r.read(buf)) >= 0; ) {
                  synchronized (sending) {
                    writeRawFrame(out, 0x2, java.util.Arrays.copyOf(buf, n));
                  }
                }
                synchronized (sending) {
                  writeRawFrame(out, 0x8, new byte[] {0x03, (byte) 0xE8});
                }
              } catch (IOException e) {
                // either side is gone
              }
            },
            "scripted-node-stream-up");
    up.setDaemon(true);
    up.start();
    DataInputStream frames = new DataInputStream(in);
    try (renter) {
      OutputStream r = renter.getOutputStream();
      while (true) {
        int b0 = frames.readUnsignedByte();
        int b1 = frames.readUnsignedByte();
        int opcode = b0 & 0x0f;
        long len = b1 & 0x7f;
        if (len == 126) len = frames.readUnsignedShort();
        else if (len == 127) len = frames.readLong();
        byte[] mask = new byte[4];
        if ((b1 & 0x80) != 0) frames.readFully(mask);
        byte[] payload = new byte[(int) len];
        frames.readFully(payload);
        for (int i = 0; i < payload.length; i++) payload[i] ^= mask[i % 4];
        switch (opcode) {
          case 0x0, 0x2 -> {
            r.write(payload);
            r.flush();
          }
          case 0x8 -> {
            synchronized (sending) {
              writeRawFrame(out, 0x8, payload);
            }
            return;
          }
          case 0x9 -> {
            synchronized (sending) {
              writeRawFrame(out, 0xA, payload);
            }
          }
          default -> {}
        }
      }
    } catch (IOException e) {
      // the agent closed the stream
    } finally {
      socket.close();
    }
  }

  private static void writeRawFrame(OutputStream out, int opcode, byte[] payload)
      throws IOException {
    ByteArrayOutputStream frame = new ByteArrayOutputStream();
    frame.write(0x80 | opcode);
    if (payload.length < 126) {
      frame.write(payload.length);
    } else if (payload.length < 65536) {
      frame.write(126);
      frame.write(payload.length >> 8);
      frame.write(payload.length & 0xff);
    } else {
      frame.write(127);
      for (int i = 7; i >= 0; i--) frame.write((int) ((long) payload.length >> (8 * i)) & 0xff);
    }
    frame.write(payload);
    out.write(frame.toByteArray());
    out.flush();
  }

  private static String readLine(InputStream in) throws IOException {
    StringBuilder sb = new StringBuilder();
    int c;
    while ((c = in.read()) != -1) {
      if (c == '\n') break;
      if (c != '\r') sb.append((char) c);
    }
    if (c == -1 && sb.length() == 0) throw new IOException("connection closed");
    return sb.toString();
  }

  /** Frames of one type received so far, in order (drains nothing). */
  <T extends AgentFrame> List<T> framesOf(Class<T> type) {
    List<T> out = new ArrayList<>();
    for (Received r : received) if (type.isInstance(r.frame())) out.add(type.cast(r.frame()));
    return out;
  }
}
