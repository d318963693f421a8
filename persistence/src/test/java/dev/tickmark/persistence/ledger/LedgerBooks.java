package dev.tickmark.persistence.ledger;

import dev.tickmark.engine.account.Account;
import dev.tickmark.persistence.Jdbc;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.persistence.query.Offset;
import org.apache.pekko.projection.eventsourced.EventEnvelope;

/**
 * A test's ledger: account events written with the ledger projection's own write (as it writes
 * them), and the audit read back.
 */
final class LedgerBooks {
  private final Jdbc jdbc;
  private long seq;

  LedgerBooks(Jdbc jdbc) {
    this.jdbc = jdbc;
  }

  void book(String accountId, List<Account.Event> events) {
    List<EventEnvelope<Account.Event>> group = new ArrayList<>();
    for (Account.Event e : events)
      group.add(EventEnvelope.create(Offset.noOffset(), "Account|" + accountId, ++seq, e, 0L));
    jdbc.run(
            c -> {
              LedgerProjection.insertLegs(c, group);
              return null;
            })
        .toCompletableFuture()
        .join();
  }

  LedgerReadModel.Audit audit() {
    return new LedgerReadModel(jdbc).audit().toCompletableFuture().join();
  }
}
