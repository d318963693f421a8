package dev.tickmark.bench;

import dev.tickmark.engine.account.Account;
import java.time.Instant;
import java.util.Set;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.javadsl.CommandHandler;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehavior;

/**
 * The smallest event-sourced actor that writes what an account writes: one {@link Account.Captured}
 * per command, through the same journal, optionally tagged as accounts are (one tag per event). It
 * has no domain logic, no sharding and no snapshots, so comparing it with the {@code Account} path
 * separates the journal's cost (and the tag's) from the entity's.
 */
final class JournalProbe
    extends EventSourcedBehavior<JournalProbe.Command, Account.Captured, Long> {
  interface Command {}

  record Write(long second, ActorRef<Done> replyTo) implements Command {}

  private final String id;
  private final Set<String> tags;

  JournalProbe(String id, String tagOrNull) {
    super(PersistenceId.of("BenchProbe", id));
    this.id = id;
    this.tags = tagOrNull == null ? Set.of() : Set.of(tagOrNull);
  }

  @Override
  public Long emptyState() {
    return 0L;
  }

  @Override
  public Set<String> tagsFor(Account.Captured event) {
    return tags;
  }

  @Override
  public CommandHandler<Command, Account.Captured, Long> commandHandler() {
    return newCommandHandlerBuilder()
        .forAnyState()
        .onCommand(
            Write.class,
            (state, cmd) ->
                Effect()
                    .persist(
                        new Account.Captured(
                            id, cmd.second(), cmd.second() * 803, 8030, Instant.now()))
                    .thenReply(cmd.replyTo(), s -> Done.getInstance()))
        .build();
  }

  @Override
  public EventHandler<Long, Account.Captured> eventHandler() {
    return newEventHandlerBuilder().forAnyState().onAnyEvent((state, e) -> state + 1);
  }
}
