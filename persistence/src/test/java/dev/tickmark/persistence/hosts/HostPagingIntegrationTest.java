package dev.tickmark.persistence.hosts;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.persistence.DatabaseSettings;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.Migrations;
import dev.tickmark.persistence.TestDatabase;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Keyset pages of hosts on a real PostgreSQL: every host exactly once, in (created_at, host_id)
 * order, ties on created_at included; removed hosts and other owners' hosts left out.
 */
class HostPagingIntegrationTest {
  static DatabaseSettings db;
  static Jdbc jdbc;
  static HostReadModel hosts;
  static final Instant T0 = Instant.parse("2026-11-25T12:00:00Z");
  static final List<String> MINE = new ArrayList<>();

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.fresh("hostpaging");
    Migrations.migrate(db);
    jdbc = Jdbc.create(db, "hostpaging-test", Executors.newFixedThreadPool(2));
    hosts = new HostReadModel(jdbc);
    // 23 of mine, three at a time created in the same microsecond (the host id breaks the tie),
    // inserted out of order; 4 removed ones of mine and 10 of someone else's in between
    for (int i = 22; i >= 0; i--) {
      String id = String.format("host_%024d", i);
      insert(id, "acc_me", "verified", T0.plusSeconds(i / 3));
      MINE.add(id);
    }
    MINE.sort(null);
    for (int i = 0; i < 4; i++)
      insert(String.format("host_r%023d", i), "acc_me", "removed", T0.plusSeconds(i));
    for (int i = 0; i < 10; i++)
      insert(String.format("host_o%023d", i), "acc_other", "verified", T0.plusSeconds(i));
  }

  @AfterAll
  static void stop() {
    if (jdbc != null) jdbc.close();
  }

  static void insert(String id, String owner, String status, Instant createdAt) throws Exception {
    try (Connection c = DriverManager.getConnection(db.url(), db.user(), db.password());
        PreparedStatement st =
            c.prepareStatement(
                "INSERT INTO hosts (host_id, owner_id, region, status, created_at, updated_at)"
                    + " VALUES (?, ?, 'eu-nl', ?, ?, ?)")) {
      st.setString(1, id);
      st.setString(2, owner);
      st.setString(3, status);
      st.setTimestamp(4, Timestamp.from(createdAt));
      st.setTimestamp(5, Timestamp.from(createdAt));
      st.executeUpdate();
    }
  }

  static List<HostReadModel.HostRow> owner(String after, int limit) throws Exception {
    return hosts.byOwner("acc_me", after, limit).toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  @Test
  void pagesOfEverySizeListEachOfMyHostsOnceInOrder() throws Exception {
    for (int limit : new int[] {1, 2, 3, 4, 5, 7, 22, 23, 24, 200}) {
      List<String> seen = new ArrayList<>();
      String after = null;
      int pages = 0;
      while (true) {
        List<HostReadModel.HostRow> page = owner(after, limit);
        assertTrue(page.size() <= limit);
        page.forEach(r -> seen.add(r.hostId()));
        pages++;
        if (page.size() < limit) break;
        after = page.get(page.size() - 1).hostId();
        assertTrue(pages <= 30, "paging ends");
      }
      assertEquals(MINE, seen, "limit " + limit);
    }
  }

  @Test
  void anUnknownCursorGivesAnEmptyPage() throws Exception {
    assertEquals(List.of(), owner("host_ffffffffffffffffffffffff", 10));
  }

  @Test
  void operatorsPageAllHostsOrThoseWithAStatus() throws Exception {
    List<String> all = new ArrayList<>();
    String after = null;
    List<HostReadModel.HostRow> page;
    do {
      page = hosts.byStatus(null, after, 5).toCompletableFuture().get(10, TimeUnit.SECONDS);
      page.forEach(r -> all.add(r.hostId()));
      if (!page.isEmpty()) after = page.get(page.size() - 1).hostId();
    } while (page.size() == 5);
    assertEquals(23 + 4 + 10, all.size());
    assertEquals(all.size(), all.stream().distinct().count());

    List<String> removed = new ArrayList<>();
    after = null;
    do {
      page = hosts.byStatus("removed", after, 3).toCompletableFuture().get(10, TimeUnit.SECONDS);
      page.forEach(r -> removed.add(r.hostId()));
      if (!page.isEmpty()) after = page.get(page.size() - 1).hostId();
    } while (page.size() == 3);
    assertEquals(4, removed.size());
  }
}
