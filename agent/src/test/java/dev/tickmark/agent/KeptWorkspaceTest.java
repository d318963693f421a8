package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.tickmark.agent.snapshot.Snapshots;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A workspace kept for a snapshot outlives an agent restart, and not a day. */
class KeptWorkspaceTest {
  @TempDir Path state;

  @Test
  void keptWorkspacesSurviveARestartAndGoAfterADay() throws Exception {
    RentalDirs dirs = new RentalDirs(state);
    Path kept = dirs.prepare("rnt_kept");
    Files.writeString(kept.resolve("work"), "w");
    Instant at = Instant.now();
    assertTrue(dirs.keep("rnt_kept", at));
    assertEquals(kept, dirs.kept("rnt_kept"));
    assertFalse(Files.exists(dirs.noticeFolder("rnt_kept")));
    Path running = dirs.prepare("rnt_running"); // a rental that ran when the agent died
    assertNull(dirs.kept("rnt_running"));

    List<String> cleaned = new ArrayList<>();
    dirs.wipeLeftovers(cleaned::add); // what an agent does at start
    assertEquals(List.of("rnt_running"), cleaned);
    assertFalse(Files.exists(running));
    assertEquals("w", Files.readString(kept.resolve("work")), "the kept one survives");

    dirs.purgeKept(at.plus(Snapshots.KEEP).minusSeconds(1));
    assertEquals(kept, dirs.kept("rnt_kept"));
    dirs.purgeKept(at.plus(Snapshots.KEEP).plusSeconds(1));
    assertNull(dirs.kept("rnt_kept"));
    assertFalse(Files.exists(dirs.rental("rnt_kept")));
  }
}
