package dev.tickmark.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigValueType;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Join;
import org.apache.pekko.cluster.typed.JoinSeedNodes;
import org.junit.jupiter.api.Test;

/**
 * An entity's shard is its id's hash modulo the number of shards, so every node must use the same
 * number: the shipped default, {@code TICKMARK_NUMBER_OF_SHARDS}, and Pekko's join check with real
 * actor systems (no database: nothing here starts sharding).
 */
class NumberOfShardsTest {
  private static final Duration JOIN = Duration.ofSeconds(30);

  @Test
  void aHundredShardsByDefaultAndTheEnvironmentGivesANumber() {
    Config shipped = Node.config(NodeSettings.fromEnvironment(Map.of()));
    assertEquals(100, shipped.getInt(NodeSettings.NUMBER_OF_SHARDS));
    Config set =
        Node.config(NodeSettings.fromEnvironment(Map.of("TICKMARK_NUMBER_OF_SHARDS", " 300 ")));
    assertEquals(300, set.getInt(NodeSettings.NUMBER_OF_SHARDS));
    // Pekko's join check compares values as written: a string "300" would differ from a file's 300.
    assertEquals(ConfigValueType.NUMBER, set.getValue(NodeSettings.NUMBER_OF_SHARDS).valueType());
  }

  @Test
  void aNumberOfShardsThatIsNotAPositiveNumberStopsTheNodeSayingWhy() {
    for (String bad : List.of("0", "-5", "ten", "1.5")) {
      IllegalArgumentException e =
          assertThrows(
              IllegalArgumentException.class,
              () -> NodeSettings.fromEnvironment(Map.of("TICKMARK_NUMBER_OF_SHARDS", bad)));
      assertEquals(
          "TICKMARK_NUMBER_OF_SHARDS must be a positive whole number, the same on every node; got \""
              + bad
              + "\"",
          e.getMessage());
    }
  }

  /**
   * A node with another number is refused at join and stops itself, and the cluster never lists it;
   * a node given the cluster's number through the environment joins.
   */
  @Test
  void aNodeWithAnotherNumberOfShardsIsRefusedAtJoinAndStops() throws Exception {
    List<ActorSystem<Void>> systems = new ArrayList<>();
    try {
      ActorSystem<Void> first = started(systems, Map.of());
      Cluster cluster = Cluster.get(first);
      Address seed = cluster.selfMember().address();
      cluster.manager().tell(Join.create(seed));
      Eventually.eventually(
          JOIN, () -> assertEquals(MemberStatus.up(), cluster.selfMember().status()));

      ActorSystem<Void> other = started(systems, Map.of("TICKMARK_NUMBER_OF_SHARDS", "1000"));
      Address refused = Cluster.get(other).selfMember().address();
      Cluster.get(other).manager().tell(new JoinSeedNodes(List.of(seed)));
      other.getWhenTerminated().toCompletableFuture().get(JOIN.toSeconds(), TimeUnit.SECONDS);
      assertEquals(
          CoordinatedShutdown.incompatibleConfigurationDetectedReason(),
          CoordinatedShutdown.get(other).getShutdownReason().orElseThrow());

      ActorSystem<Void> same = started(systems, Map.of("TICKMARK_NUMBER_OF_SHARDS", "100"));
      Address joining = Cluster.get(same).selfMember().address();
      Cluster.get(same).manager().tell(new JoinSeedNodes(List.of(seed)));
      Eventually.eventually(
          JOIN,
          () ->
              assertTrue(
                  members(first)
                      .anyMatch(
                          m -> m.address().equals(joining) && m.status() == MemberStatus.up()),
                  "the node with the cluster's number is up"));
      assertTrue(
          members(first).noneMatch(m -> m.address().equals(refused)),
          "the refused node is not a member");
    } finally {
      for (ActorSystem<Void> s : systems) s.terminate();
      for (ActorSystem<Void> s : systems)
        s.getWhenTerminated().toCompletableFuture().get(JOIN.toSeconds(), TimeUnit.SECONDS);
    }
  }

  private static Stream<Member> members(ActorSystem<Void> system) {
    return StreamSupport.stream(Cluster.get(system).state().getMembers().spliterator(), false);
  }

  private static ActorSystem<Void> started(
      List<ActorSystem<Void>> systems, Map<String, String> env) {
    NodeSettings settings =
        NodeSettings.fromEnvironment(env)
            .withPorts(0, 0, 0)
            .withExitJvmOnShutdown(false); // a refused node exits its JVM in production
    ActorSystem<Void> system =
        ActorSystem.create(Behaviors.empty(), Node.SYSTEM_NAME, Node.config(settings));
    systems.add(system);
    return system;
  }
}
