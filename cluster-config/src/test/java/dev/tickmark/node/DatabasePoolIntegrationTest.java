package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.zaxxer.hikari.HikariDataSource;
import dev.tickmark.persistence.TestDatabase;
import org.apache.pekko.persistence.jdbc.db.SlickExtension;
import org.apache.pekko.persistence.jdbc.db.SlickExtensionImpl;
import org.junit.jupiter.api.Test;
import slick.jdbc.hikaricp.HikariCPJdbcDataSource;

/**
 * {@code tickmark.database.pool-size} sizes a running node's two pools: the journal's (Slick) and
 * the read side's.
 */
class DatabasePoolIntegrationTest {

  @Test
  void theConfiguredPoolSizeReachesBothHikariPools() throws Exception {
    NodeSettings settings =
        TestNodes.settings(TestDatabase.fresh("database_pool"))
            .withConfig("tickmark.database.pool-size", 3);
    try (Node node = Node.start(settings)) {
      assertEquals(3, node.database().poolSize());
      HikariDataSource readSide =
          (HikariDataSource)
              DatabaseReadinessCheck.Registered.get(node.system()).jdbc.get().dataSource();
      assertEquals(3, readSide.getMaximumPoolSize());
      SlickExtensionImpl slick =
          (SlickExtensionImpl) SlickExtension.get(node.system().classicSystem());
      var journal =
          slick.database(node.system().settings().config().getConfig("jdbc-journal")).database();
      assertEquals(3, ((HikariCPJdbcDataSource) journal.source()).ds().getMaximumPoolSize());
      assertEquals(
          3,
          node.system()
              .settings()
              .config()
              .getInt(
                  "pekko.projection.jdbc.blocking-jdbc-dispatcher.thread-pool-executor.fixed-pool-size"));
    }
  }
}
