package dev.tickmark.persistence.journal;

import dev.tickmark.engine.FreshEntities;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.persistence.SnapshotMetadata;
import org.apache.pekko.persistence.jdbc.config.EventJournalTableConfiguration;
import org.apache.pekko.persistence.jdbc.config.JournalConfig;
import org.apache.pekko.persistence.jdbc.config.SnapshotConfig;
import org.apache.pekko.persistence.jdbc.config.SnapshotTableColumnNames;
import org.apache.pekko.persistence.jdbc.config.SnapshotTableConfiguration;
import org.apache.pekko.persistence.jdbc.snapshot.dao.DefaultSnapshotDao;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.stream.Materializer;
import scala.Option;
import scala.Tuple2;
import scala.concurrent.ExecutionContext;
import scala.concurrent.Future;
import slick.dbio.DBIOAction;
import slick.jdbc.JdbcBackend;
import slick.jdbc.JdbcProfile;
import slick.jdbc.SimpleJdbcAction;

/**
 * The plugin's snapshot DAO with one change: a recovery's read of the latest snapshot also reads
 * the entity's highest sequence number in the journal, in the same statement, and leaves it in
 * {@link HighestSequenceNrs} for the journal's replay that follows. A recovery then costs one round
 * trip before its events instead of two (a new rental's launch, and every entity a node loss
 * moves). The snapshot read is the plugin's (the same row, deserialized the same way); everything
 * else is the plugin's own code. An entity started under an id drawn for it a moment ago ({@link
 * FreshEntities}) reads nothing at all: no snapshot, and 0 as its highest number. The journal's
 * table is that of {@code pekko.persistence.journal.plugin}, in the same database. Chosen with
 * {@code jdbc-snapshot-store.dao}.
 */
public class RecoverySnapshotDao extends DefaultSnapshotDao {
  private final JdbcBackend.JdbcDatabaseDef db;
  private final Serialization serialization;
  private final HighestSequenceNrs highestRead;
  private final FreshEntities freshEntities;
  private final String latestWithHighest;

  public RecoverySnapshotDao(
      JdbcBackend.JdbcDatabaseDef db,
      JdbcProfile profile,
      SnapshotConfig snapshotConfig,
      Serialization serialization,
      ExecutionContext ec,
      Materializer mat) {
    super(db, profile, snapshotConfig, serialization, ec, mat);
    this.db = db;
    this.serialization = serialization;
    String journalPlugin =
        serialization.system().settings().config().getString("pekko.persistence.journal.plugin");
    EventJournalTableConfiguration journal =
        new JournalConfig(serialization.system().settings().config().getConfig(journalPlugin))
            .eventJournalTableConfiguration();
    String journalTable = BatchedJournalDao.qualified(journal.schemaName(), journal.tableName());
    highestRead = HighestSequenceNrs.of(serialization.system(), journalTable);
    freshEntities = FreshEntities.get(Adapter.toTyped(serialization.system()));
    SnapshotTableConfiguration snapshots = snapshotConfig.snapshotTableConfiguration();
    SnapshotTableColumnNames c = snapshots.columnNames();
    // One row always: the journal's highest (null if none), and the latest snapshot's columns
    // (null if none), each by its primary key's index, as the plugin's two queries read them.
    latestWithHighest =
        "SELECT (SELECT max("
            + journal.columnNames().sequenceNumber()
            + ") FROM "
            + journalTable
            + " WHERE "
            + journal.columnNames().persistenceId()
            + " = ?), s.* FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT "
            + String.join(
                ", ",
                c.sequenceNumber(),
                c.created(),
                c.snapshotSerId(),
                c.snapshotSerManifest(),
                c.snapshotPayload(),
                c.metaSerId(),
                c.metaSerManifest(),
                c.metaPayload())
            + " FROM "
            + BatchedJournalDao.qualified(snapshots.schemaName(), snapshots.tableName())
            + " WHERE "
            + c.persistenceId()
            + " = ? ORDER BY "
            + c.sequenceNumber()
            + " DESC LIMIT 1) AS s ON true";
  }

  @Override
  public Future<Option<Tuple2<SnapshotMetadata, Object>>> latestSnapshot(String persistenceId) {
    HighestSequenceNrs.Entry token = highestRead.begin(persistenceId);
    if (token == null) return super.latestSnapshot(persistenceId);
    if (freshEntities.take(persistenceId)) {
      // Started under an id drawn at random a moment ago: no snapshot and no events to read.
      highestRead.complete(persistenceId, token, 0L);
      return Future.successful(Option.empty());
    }
    SimpleJdbcAction<Option<Tuple2<SnapshotMetadata, Object>>> read =
        new SimpleJdbcAction<>(
            ctx -> {
              try {
                return read(ctx.connection(), persistenceId, token);
              } catch (SQLException e) {
                throw new SnapshotReadException(e);
              }
            });
    Future<Option<Tuple2<SnapshotMetadata, Object>>> latest = run(read);
    latest.onComplete(
        result -> {
          if (result.isFailure()) highestRead.abandon(persistenceId, token);
          return null;
        },
        HighestSequenceNrs.ON_COMPLETING_THREAD);
    return latest;
  }

  /** See {@code BatchedJournalDao.run}: Slick's effect type, which Java cannot name. */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private Future<Option<Tuple2<SnapshotMetadata, Object>>> run(
      SimpleJdbcAction<Option<Tuple2<SnapshotMetadata, Object>>> read) {
    return db.run((DBIOAction) read);
  }

  private Option<Tuple2<SnapshotMetadata, Object>> read(
      Connection connection, String persistenceId, HighestSequenceNrs.Entry token)
      throws SQLException {
    long highest;
    Option<Tuple2<SnapshotMetadata, Object>> latest;
    try (PreparedStatement ps = connection.prepareStatement(latestWithHighest)) {
      ps.setString(1, persistenceId);
      ps.setString(2, persistenceId);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) throw new SQLException("the snapshot read returned no row");
        highest = rs.getLong(1); // 0 if the journal has none, as the plugin answers
        long sequenceNr = rs.getLong(2);
        if (rs.wasNull()) {
          latest = Option.empty();
        } else {
          long created = rs.getLong(3);
          Object snapshot =
              serialization.deserialize(rs.getBytes(6), rs.getInt(4), rs.getString(5)).get();
          int metaSerId = rs.getInt(7);
          boolean hasMeta = !rs.wasNull();
          byte[] metaPayload = rs.getBytes(9);
          SnapshotMetadata metadata =
              hasMeta && metaPayload != null
                  ? SnapshotMetadata.apply(
                      persistenceId,
                      sequenceNr,
                      created,
                      Option.apply(
                          serialization
                              .deserialize(
                                  metaPayload,
                                  metaSerId,
                                  rs.getString(8) == null ? "" : rs.getString(8))
                              .get()))
                  : SnapshotMetadata.apply(persistenceId, sequenceNr, created);
          latest = Option.apply(Tuple2.apply(metadata, snapshot));
        }
      }
    }
    highestRead.complete(persistenceId, token, highest);
    return latest;
  }

  /** A failed snapshot read: the recovery fails as with the plugin's own. */
  static final class SnapshotReadException extends RuntimeException {
    SnapshotReadException(SQLException cause) {
      super(cause.getMessage(), cause);
    }
  }
}
