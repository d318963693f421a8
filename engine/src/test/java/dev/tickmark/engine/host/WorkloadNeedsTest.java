package dev.tickmark.engine.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.engine.host.verification.Verification.WorkloadRuntime;
import org.junit.jupiter.api.Test;

/** What a rental needs of its host's runtime, against what hosts said (or did not say). */
class WorkloadNeedsTest {
  static final WorkloadRuntime DOCKER = new WorkloadRuntime("docker", true);
  static final WorkloadRuntime DOCKER_WITHOUT_BRIDGE = new WorkloadRuntime("docker", false);
  static final WorkloadRuntime SANDBOX = new WorkloadRuntime("sandbox", true);

  @Test
  void aRentalThatNeedsNothingRunsAnywhere() {
    for (WorkloadRuntime r : java.util.Arrays.asList(DOCKER, DOCKER_WITHOUT_BRIDGE, SANDBOX, null))
      assertNull(WorkloadNeeds.ANY.refusal(r), String.valueOf(r));
  }

  @Test
  void networkIsRefusedOnlyWhereTheHostSaidItCannotGiveIt() {
    WorkloadNeeds network = new WorkloadNeeds(true, null);
    assertNull(network.refusal(DOCKER));
    assertNull(network.refusal(null), "an agent that did not say is taken at its word of before");
    assertEquals(
        "the host cannot give a rental outbound network", network.refusal(DOCKER_WITHOUT_BRIDGE));
  }

  @Test
  void aRuntimeByNameRunsOnlyWhereTheHostSaidItUsesIt() {
    WorkloadNeeds docker = new WorkloadNeeds(false, "docker");
    assertNull(docker.refusal(DOCKER));
    assertNull(docker.refusal(DOCKER_WITHOUT_BRIDGE), "no network asked");
    assertEquals("the host does not run rentals in docker", docker.refusal(SANDBOX));
    assertEquals(
        "the host does not run rentals in docker", docker.refusal(null), "not said: not proven");
    assertEquals(
        "the host cannot give a rental outbound network",
        new WorkloadNeeds(true, "docker").refusal(DOCKER_WITHOUT_BRIDGE));
  }

  @Test
  void theRuntimesARenterMayName() {
    assertTrue(WorkloadNeeds.known("docker"));
    assertTrue(WorkloadNeeds.known("sandbox"));
    assertTrue(WorkloadNeeds.known("process"));
    assertFalse(WorkloadNeeds.known("unknown"), "what an unknown report is shown as");
    assertFalse(WorkloadNeeds.known("Docker"));
    assertFalse(WorkloadNeeds.known(""));
  }
}
