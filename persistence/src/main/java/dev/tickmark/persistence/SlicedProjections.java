package dev.tickmark.persistence;

import java.util.List;
import java.util.Optional;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ShardedDaemonProcessSettings;
import org.apache.pekko.cluster.sharding.typed.javadsl.ShardedDaemonProcess;
import org.apache.pekko.projection.Projection;
import org.apache.pekko.projection.ProjectionBehavior;

/** Runs one projection per tag slice, each exactly once in the cluster, through a {@link ShardedDaemonProcess}. */
public final class SlicedProjections {
  private SlicedProjections() {}

  /** {@code daemonName} must not be {@code projection-<name>}: ProjectionManagement owns that actor name. */
  public static <E> void init(ActorSystem<?> system, String daemonName, List<String> tags, Function<String, Projection<E>> projection) {
    ShardedDaemonProcess.get(system).init(
        ProjectionBehavior.Command.class,
        daemonName,
        tags.size(),
        i -> ProjectionBehavior.create(projection.apply(tags.get(i))),
        ShardedDaemonProcessSettings.create(system),
        Optional.of(ProjectionBehavior.stopMessage()));
  }
}
