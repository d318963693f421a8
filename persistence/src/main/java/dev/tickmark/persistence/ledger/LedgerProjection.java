package dev.tickmark.persistence.ledger;

import dev.tickmark.engine.account.Account;
import dev.tickmark.persistence.Jdbc;
import dev.tickmark.persistence.PooledJdbcSession;
import dev.tickmark.persistence.SlicedProjections;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.persistence.jdbc.query.javadsl.JdbcReadJournal;
import org.apache.pekko.persistence.query.Offset;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.projection.ProjectionId;
import org.apache.pekko.projection.eventsourced.EventEnvelope;
import org.apache.pekko.projection.eventsourced.javadsl.EventSourcedProvider;
import org.apache.pekko.projection.javadsl.GroupedProjection;
import org.apache.pekko.projection.javadsl.SourceProvider;
import org.apache.pekko.projection.jdbc.javadsl.JdbcHandler;
import org.apache.pekko.projection.jdbc.javadsl.JdbcProjection;

/**
 * Writes the ledger table from account events, one projection instance per tag slice. Rows and
 * offsets commit in one transaction (exactly-once); events are written in groups to batch the
 * inserts. (The {@link org.apache.pekko.cluster.sharding.typed.javadsl.ShardedDaemonProcess} runs
 * each slice once in the cluster.)
 */
public final class LedgerProjection {
  public static final String NAME = "ledger";

  private LedgerProjection() {}

  public static void init(ActorSystem<?> system, Jdbc jdbc) {
    SlicedProjections.init(
        system, "ledger-writer", Account.allTags(), tag -> projection(system, jdbc, tag));
  }

  /**
   * All legs of a group in one statement, its columns bound as arrays: a multi-row insert would
   * bind nine parameters a leg (three legs a settlement), which the driver encodes one by one and
   * PostgreSQL parses one by one. Rows go in the group's order, so ids follow the events.
   */
  private static final String INSERT =
      "INSERT INTO ledger_entries"
          + " (account_id, kind, amount, entry_key, rental_id, at, persistence_id, sequence_number, leg)"
          + " SELECT account_id, kind, amount, entry_key, rental_id,"
          + " TIMESTAMPTZ 'epoch' + at_micros * INTERVAL '1 microsecond', persistence_id, sequence_number, leg"
          + " FROM unnest(?::varchar[], ?::varchar[], ?::int8[], ?::varchar[], ?::varchar[], ?::int8[],"
          + " ?::varchar[], ?::int8[], ?::int2[]) WITH ORDINALITY AS l(account_id, kind, amount, entry_key,"
          + " rental_id, at_micros, persistence_id, sequence_number, leg, position)"
          + " ORDER BY position ON CONFLICT (persistence_id, sequence_number, leg) DO NOTHING";

  /** Writes the ledger legs of a group of account events, in the connection's transaction. */
  public static void insertLegs(Connection connection, List<EventEnvelope<Account.Event>> envelopes)
      throws SQLException {
    List<List<LedgerLegs.Leg>> legsOf = new ArrayList<>(envelopes.size());
    int n = 0;
    for (EventEnvelope<Account.Event> envelope : envelopes) {
      String accountId = PersistenceId.extractEntityId(envelope.persistenceId());
      List<LedgerLegs.Leg> legs = LedgerLegs.of(accountId, envelope.event());
      legsOf.add(legs);
      n += legs.size();
    }
    if (n == 0) return;
    String[] accounts = new String[n], kinds = new String[n], keys = new String[n];
    String[] rentals = new String[n], pids = new String[n];
    long[] amounts = new long[n], atMicros = new long[n], seqs = new long[n];
    short[] legNumbers = new short[n];
    int i = 0;
    for (int e = 0; e < envelopes.size(); e++) {
      EventEnvelope<Account.Event> envelope = envelopes.get(e);
      List<LedgerLegs.Leg> legs = legsOf.get(e);
      for (short leg = 0; leg < legs.size(); leg++, i++) {
        LedgerLegs.Leg l = legs.get(leg);
        accounts[i] = l.accountId();
        kinds[i] = l.kind();
        amounts[i] = l.amount();
        keys[i] = l.key();
        rentals[i] = l.rentalId();
        atMicros[i] = micros(l.at());
        pids[i] = envelope.persistenceId();
        seqs[i] = envelope.sequenceNr();
        legNumbers[i] = leg;
      }
    }
    Object[] columns = {accounts, kinds, amounts, keys, rentals, atMicros, pids, seqs, legNumbers};
    try (PreparedStatement insert = connection.prepareStatement(INSERT)) {
      for (int c = 0; c < columns.length; c++) insert.setObject(c + 1, columns[c]);
      insert.executeUpdate();
    }
  }

  /** Rounded to the microsecond, as PostgreSQL rounds a timestamp it is given with more digits. */
  static long micros(Instant at) {
    return Math.addExact(
        Math.multiplyExact(at.getEpochSecond(), 1_000_000L), (at.getNano() + 500) / 1000);
  }

  static GroupedProjection<Offset, EventEnvelope<Account.Event>> projection(
      ActorSystem<?> system, Jdbc jdbc, String tag) {
    SourceProvider<Offset, EventEnvelope<Account.Event>> source =
        EventSourcedProvider.eventsByTag(system, JdbcReadJournal.Identifier(), tag);
    return JdbcProjection.groupedWithin(
            ProjectionId.of(NAME, tag),
            source,
            () -> new PooledJdbcSession(jdbc.dataSource()),
            Writer::new,
            system)
        .withGroup(SlicedProjections.GROUP_SIZE, SlicedProjections.GROUP_WITHIN);
  }

  static final class Writer
      extends JdbcHandler<List<EventEnvelope<Account.Event>>, PooledJdbcSession> {
    private static final String AUDIT =
        "INSERT INTO account_audit"
            + " (persistence_id, sequence_number, account_id, kind, detail, effective_at, at)"
            + " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING";

    @Override
    public void process(PooledJdbcSession session, List<EventEnvelope<Account.Event>> envelopes)
        throws Exception {
      session.withConnection(
          connection -> {
            try (PreparedStatement audit = connection.prepareStatement(AUDIT)) {
              int lines = 0;
              for (EventEnvelope<Account.Event> envelope : envelopes) {
                var entry = AccountAudit.of(envelope.event());
                if (entry.isEmpty()) continue;
                audit.setString(1, envelope.persistenceId());
                audit.setLong(2, envelope.sequenceNr());
                audit.setString(3, PersistenceId.extractEntityId(envelope.persistenceId()));
                audit.setString(4, entry.get().kind());
                audit.setString(5, entry.get().detail());
                audit.setTimestamp(
                    6,
                    entry.get().effectiveAt() == null
                        ? null
                        : Timestamp.from(entry.get().effectiveAt()));
                audit.setTimestamp(7, Timestamp.from(entry.get().at()));
                audit.addBatch();
                lines++;
              }
              if (lines > 0) audit.executeBatch();
            }
            insertLegs(connection, envelopes);
            return null;
          });
    }
  }
}
