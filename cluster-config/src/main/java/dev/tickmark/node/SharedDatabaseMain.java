package dev.tickmark.node;

import dev.tickmark.persistence.EmbeddedDatabase;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

/**
 * {@code java -cp tickmark-node.jar dev.tickmark.node.SharedDatabaseMain DATA_DIR PORT}: one
 * embedded PostgreSQL on 127.0.0.1:PORT (durable, data kept in DATA_DIR) for several local nodes to
 * share, when no PostgreSQL server is at hand ({@code deploy/local-cluster.sh}). Runs until
 * SIGTERM, then stops the server.
 */
public final class SharedDatabaseMain {
  private SharedDatabaseMain() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: SharedDatabaseMain DATA_DIR PORT");
      System.exit(2);
    }
    EmbeddedDatabase db = EmbeddedDatabase.start(Path.of(args[0]), Integer.parseInt(args[1]), true);
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    db.close();
                  } catch (Exception e) {
                    System.err.println(
                        "embedded PostgreSQL did not stop cleanly: " + e.getMessage());
                  } finally {
                    stopped.countDown();
                  }
                },
                "stop-embedded-postgres"));
    System.out.println("Embedded PostgreSQL ready: " + db.settings("postgres", 1).url());
    stopped.await();
  }
}
