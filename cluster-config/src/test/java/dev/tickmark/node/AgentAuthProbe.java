package dev.tickmark.node;

import dev.tickmark.engine.host.Host;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.cluster.sharding.ShardRegion;
import org.apache.pekko.cluster.sharding.typed.GetShardRegionState;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;

/**
 * What the agent-authentication tests look at from outside the HTTP client: the {@code Host}
 * entities sharding runs on a node, and upgrades sent from a chosen loopback address (each
 * 127.0.0.x is its own client to the node's per-address throttle).
 */
final class AgentAuthProbe {
  private AgentAuthProbe() {}

  /** The ids of the {@code Host} entities running on this (single-node) cluster now. */
  static Set<String> hostEntities(Node node) {
    ShardRegion.CurrentShardRegionState state =
        AskPattern
            .<org.apache.pekko.cluster.sharding.typed.ClusterShardingQuery,
                ShardRegion.CurrentShardRegionState>
                ask(
                    ClusterSharding.get(node.system()).shardState(),
                    replyTo -> new GetShardRegionState(Host.ENTITY_KEY, replyTo),
                    Duration.ofSeconds(10),
                    node.system().scheduler())
            .toCompletableFuture()
            .join();
    Set<String> ids = new HashSet<>();
    for (ShardRegion.ShardState shard : state.getShards()) ids.addAll(shard.getEntityIds());
    return ids;
  }

  /** A raw HTTP/1.1 answer: status, headers (lower-case names) and body. */
  record Answer(int status, Map<String, String> headers, String body) {}

  /**
   * {@code GET /v1/agent/connect} from {@code local}, as a websocket upgrade or a plain GET, with
   * this Authorization header (null: none). An upgrade that succeeds (101) is closed at once.
   */
  static Answer connect(Node node, String local, String authorization, boolean upgrade) {
    URI base = URI.create(node.baseUrl());
    try (Socket socket = new Socket()) {
      socket.bind(new InetSocketAddress(InetAddress.getByName(local), 0));
      socket.connect(new InetSocketAddress(base.getHost(), base.getPort()), 5_000);
      socket.setSoTimeout(15_000);
      StringBuilder request = new StringBuilder();
      request.append("GET /v1/agent/connect HTTP/1.1\r\n");
      request.append("Host: ").append(base.getHost()).append(':').append(base.getPort());
      request.append("\r\n");
      if (authorization != null) request.append("Authorization: ").append(authorization + "\r\n");
      if (upgrade) {
        request.append("Upgrade: websocket\r\nConnection: Upgrade\r\n");
        request.append("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n");
        request.append("Sec-WebSocket-Version: 13\r\n");
      } else {
        request.append("Connection: close\r\n");
      }
      request.append("\r\n");
      socket.getOutputStream().write(request.toString().getBytes(StandardCharsets.US_ASCII));
      socket.getOutputStream().flush();
      InputStream in = socket.getInputStream();
      String statusLine = line(in);
      int status = Integer.parseInt(statusLine.split(" ")[1]);
      Map<String, String> headers = new LinkedHashMap<>();
      for (String h = line(in); !h.isEmpty(); h = line(in)) {
        int colon = h.indexOf(':');
        headers.put(
            h.substring(0, colon).trim().toLowerCase(Locale.ROOT), h.substring(colon + 1).trim());
      }
      if (status == 101) return new Answer(status, headers, "");
      int length = Integer.parseInt(headers.getOrDefault("content-length", "-1"));
      byte[] body = length >= 0 ? in.readNBytes(length) : in.readAllBytes();
      return new Answer(status, headers, new String(body, StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new AssertionError("GET /v1/agent/connect from " + local + " failed: " + e, e);
    }
  }

  private static String line(InputStream in) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (int b = in.read(); b != '\n'; b = in.read()) {
      if (b < 0) throw new IOException("the connection closed mid-line: " + out);
      if (b != '\r') out.write(b);
    }
    return out.toString(StandardCharsets.US_ASCII);
  }
}
