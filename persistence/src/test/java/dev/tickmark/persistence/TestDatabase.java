package dev.tickmark.persistence;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.UUID;

/**
 * A real PostgreSQL for tests: the server at {@code TICKMARK_TEST_DB_URL} (CI sets it; user from
 * {@code TICKMARK_TEST_DB_USER}, default {@code postgres}) or else one embedded server per JVM.
 * Each call to {@link #fresh} creates a new, empty database, so test classes never see each other's
 * rows. On a shared server the databases this JVM created are dropped when it exits (set {@code
 * TICKMARK_TEST_KEEP_DATABASES=true} to keep them for a post-mortem).
 */
public final class TestDatabase {
  private static EmbeddedDatabase embedded;
  private static final List<String> created = new ArrayList<>();

  private TestDatabase() {}

  public static synchronized DatabaseSettings fresh(String purpose) {
    DatabaseSettings admin = adminSettings();
    String name =
        ("tmk_" + purpose + "_" + UUID.randomUUID().toString().substring(0, 8))
            .toLowerCase(Locale.ROOT)
            .replaceAll("[^a-z0-9_]", "_");
    try (Connection c = DriverManager.getConnection(admin.url(), admin.user(), admin.password());
        Statement st = c.createStatement()) {
      st.execute("CREATE DATABASE " + name);
      if (embedded == null) dropAtExit(admin, name);
    } catch (Exception e) {
      throw new IllegalStateException(
          "cannot create test database on " + admin.url() + ": " + e.getMessage(), e);
    }
    String base = admin.url();
    int slash = base.lastIndexOf('/');
    int query = base.indexOf('?', slash);
    String url = base.substring(0, slash + 1) + name + (query >= 0 ? base.substring(query) : "");
    return new DatabaseSettings(url, admin.user(), admin.password(), 4);
  }

  /** The server's maintenance database, where test databases are created. */
  public static synchronized DatabaseSettings adminSettings() {
    String url = System.getenv("TICKMARK_TEST_DB_URL");
    if (url != null && !url.isBlank()) {
      String user = envOr("TICKMARK_TEST_DB_USER", "postgres");
      return new DatabaseSettings(url, user, envOr("TICKMARK_TEST_DB_PASSWORD", ""), 2);
    }
    if (embedded == null) {
      try {
        Path dir = Files.createTempDirectory("tickmark-test-pg");
        embedded = EmbeddedDatabase.start(dir, 0, false);
        EmbeddedDatabase started = embedded;
        Runtime.getRuntime()
            .addShutdownHook(
                new Thread(
                    () -> {
                      try {
                        started.close();
                        deleteRecursively(dir);
                      } catch (Exception ignored) {
                        // the JVM is going away; a leftover temp folder is all that can remain
                      }
                    }));
      } catch (Exception e) {
        throw new IllegalStateException("cannot start embedded PostgreSQL: " + e.getMessage(), e);
      }
    }
    return embedded.settings("postgres", 2);
  }

  private static void dropAtExit(DatabaseSettings admin, String name) {
    if ("true".equalsIgnoreCase(System.getenv("TICKMARK_TEST_KEEP_DATABASES"))) return;
    if (created.isEmpty()) {
      Runtime.getRuntime().addShutdownHook(new Thread(() -> dropAll(admin), "drop-test-databases"));
    }
    created.add(name);
  }

  private static void dropAll(DatabaseSettings admin) {
    List<String> names;
    synchronized (TestDatabase.class) {
      names = List.copyOf(created);
    }
    try (Connection c = DriverManager.getConnection(admin.url(), admin.user(), admin.password());
        Statement st = c.createStatement()) {
      for (String name : names) {
        try {
          st.execute(
              "DROP DATABASE IF EXISTS "
                  + name
                  + " WITH (FORCE)"); // PostgreSQL 13+: ends leftover sessions
        } catch (Exception e) {
          System.err.println("test database " + name + " left on the server: " + e.getMessage());
        }
      }
    } catch (Exception e) {
      System.err.println("test databases left on the server: " + e.getMessage());
    }
  }

  private static void deleteRecursively(Path dir) throws java.io.IOException {
    try (var paths = Files.walk(dir)) {
      paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  private static String envOr(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isBlank() ? fallback : v;
  }
}
