package dev.tickmark.node;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Ports for the nodes the tests start, chosen below Linux's ephemeral range (32768–60999 by
 * default). A port the kernel hands out for {@code bind(0)} is free now but is also what it hands
 * out as the local end of outgoing connections: a node's own connections to its database, opened
 * before it binds its HTTP port, once took that port ("Address already in use",
 * EmbeddedDatabaseShutdownIntegrationTest in CI). Below the range no outgoing connection lands on
 * it, and no port is handed out twice in one test JVM.
 */
final class TestPorts {
  private static final int FROM = 20_000;
  private static final int UNTIL = 32_000;
  private static final Set<Integer> GIVEN = ConcurrentHashMap.newKeySet();

  private TestPorts() {}

  static int free() throws IOException {
    for (int attempt = 0; attempt < 1_000; attempt++) {
      int port = ThreadLocalRandom.current().nextInt(FROM, UNTIL);
      if (!GIVEN.add(port)) continue;
      try (ServerSocket socket = new ServerSocket(port, 1, InetAddress.getLoopbackAddress())) {
        return port;
      } catch (IOException inUse) {
        // taken by something else: try another
      }
    }
    throw new IOException("no free port between " + FROM + " and " + UNTIL);
  }
}
