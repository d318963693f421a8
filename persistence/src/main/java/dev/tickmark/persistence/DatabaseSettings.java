package dev.tickmark.persistence;

/**
 * Where PostgreSQL is and how many connections each pool may hold. {@code poolSize} is used for the
 * journal's Slick pool ({@code numThreads == maxConnections}) and for the read-side pool.
 */
public record DatabaseSettings(String url, String user, String password, int poolSize) {
  public DatabaseSettings {
    if (url == null || url.isBlank())
      throw new IllegalArgumentException("database url is required");
    if (poolSize < 1) throw new IllegalArgumentException("pool size must be at least 1");
  }

  /** The JDBC url with the PostgreSQL driver options the write path depends on. */
  public String tunedUrl() {
    if (url.contains("reWriteBatchedInserts")) return url;
    return url + (url.contains("?") ? "&" : "?") + "reWriteBatchedInserts=true";
  }

  @Override
  public String toString() {
    // Never print the password.
    return "DatabaseSettings[url=" + url + ", user=" + user + ", poolSize=" + poolSize + "]";
  }
}
