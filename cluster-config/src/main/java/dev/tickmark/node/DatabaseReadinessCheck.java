package dev.tickmark.node;

import dev.tickmark.persistence.Jdbc;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.actor.typed.Extension;
import org.apache.pekko.actor.typed.ExtensionId;
import org.apache.pekko.actor.typed.javadsl.Adapter;

/**
 * Pekko Management's readiness check for PostgreSQL ({@code /ready}): a {@code SELECT 1} through
 * the read side's pool, on its blocking JDBC executor (never an actor or HTTP thread). The pool's
 * short connection timeout and an answer deadline (800 ms, under Management's {@code
 * check-timeout}) bound it, so an unreachable database makes {@code /ready} fail (Management
 * answers 500 "Not Healthy") within a second instead of hanging. Configured in cluster.conf.
 */
public final class DatabaseReadinessCheck implements Supplier<CompletionStage<Boolean>> {
  private static final long ANSWER_WITHIN_MILLIS = 800;

  private final Registered registered;

  /** Management instantiates checks reflectively with the classic actor system. */
  public DatabaseReadinessCheck(ActorSystem system) {
    this.registered = Registered.get(Adapter.toTyped(system));
  }

  @Override
  public CompletionStage<Boolean> get() {
    Jdbc jdbc = registered.jdbc.get();
    if (jdbc == null) return CompletableFuture.completedFuture(false); // the node is still starting
    return jdbc.run(
            connection -> {
              try (var st = connection.createStatement()) {
                st.setQueryTimeout(1);
                try (var rs = st.executeQuery("SELECT 1")) {
                  return rs.next() && rs.getInt(1) == 1;
                }
              }
            })
        .toCompletableFuture()
        .exceptionally(failure -> false)
        // answer "not ready" before Management's 1 s check-timeout turns a slow pool into a 500
        .completeOnTimeout(false, ANSWER_WITHIN_MILLIS, TimeUnit.MILLISECONDS);
  }

  /** The pool the check uses, registered by {@link Node} once it has created it. */
  static final class Registered implements Extension {
    final AtomicReference<Jdbc> jdbc = new AtomicReference<>();

    static Registered get(org.apache.pekko.actor.typed.ActorSystem<?> system) {
      return Id.INSTANCE.apply(system);
    }

    private static final class Id extends ExtensionId<Registered> {
      private static final Id INSTANCE = new Id();

      @Override
      public Registered createExtension(org.apache.pekko.actor.typed.ActorSystem<?> system) {
        return new Registered();
      }
    }
  }
}
