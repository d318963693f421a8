package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The host's socat as a helper container runs it: its ELF interpreter read from the file, the host
 * folders to mount, and the command lines ({@code DockerAgentSshTest} runs one through a real
 * daemon).
 */
class HostSocatTest {
  @TempDir Path tmp;

  /** The interpreter of this machine's own programs is the loader the system runs them with. */
  @Test
  void readsTheInterpreterADynamicallyLinkedProgramNames() throws Exception {
    Path sh = Path.of("/bin/sh").toRealPath();
    String interpreter = HostSocat.interpreter(sh);
    assertTrue(interpreter != null && interpreter.startsWith("/"), String.valueOf(interpreter));
    assertTrue(Files.isExecutable(Path.of(interpreter)), interpreter);
    assertTrue(Path.of(interpreter).getFileName().toString().startsWith("ld-"), interpreter);
  }

  @Test
  void aFileThatIsNoProgramHasNoInterpreter() throws Exception {
    Path text = Files.writeString(tmp.resolve("not-elf"), "#!/bin/sh\necho hi\n");
    assertNull(HostSocat.interpreter(text));
    assertNull(HostSocat.of(text), "no helper from it");
    Path empty = Files.createFile(tmp.resolve("empty"));
    assertNull(HostSocat.interpreter(empty));
  }

  /** A statically linked program (Debian's busybox-static, the docker tests' image) has none. */
  @Test
  void aStaticProgramHasNoInterpreter() throws Exception {
    Path busybox = Path.of("/bin/busybox");
    Assumptions.assumeTrue(Files.isRegularFile(busybox), "no /bin/busybox here");
    // Debian ships busybox statically linked (busybox-static) or dynamically (busybox): only a
    // static one is asserted
    String interpreter = HostSocat.interpreter(busybox.toRealPath());
    Assumptions.assumeTrue(interpreter == null, "this busybox is dynamically linked");
    assertNull(HostSocat.of(busybox));
  }

  @Test
  void mountsTheFoldersThatHoldTheProgramItsLoaderAndLibrariesReadOnly() {
    HostSocat socat =
        new HostSocat(
            Path.of("/usr/bin/socat"),
            Path.of("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"),
            List.of(Path.of("/usr/lib/x86_64-linux-gnu"), Path.of("/usr/lib")),
            List.of(Path.of("/usr")));
    assertEquals(
        List.of(
            "-v",
            "/usr:/tickmark-host/usr:ro",
            "--entrypoint",
            "/tickmark-host/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"),
        socat.mountsAndEntryPoint());
    assertEquals(
        List.of(
            "--inhibit-cache",
            "--library-path",
            "/tickmark-host/usr/lib/x86_64-linux-gnu:/tickmark-host/usr/lib",
            "/tickmark-host/usr/bin/socat",
            "-",
            "TCP4:127.0.0.1:8888"),
        socat.command("TCP4:127.0.0.1:8888"));
  }

  /** Found on this machine: every path it will mount and run is really there, under a mount. */
  @Test
  void theHostsSocatWhereInstalled() {
    HostSocat socat = HostSocat.find();
    Assumptions.assumeTrue(socat != null, "no socat on this machine");
    assertTrue(Files.isExecutable(socat.socat()), socat.toString());
    assertTrue(Files.isExecutable(socat.loader()), socat.toString());
    assertTrue(socat.libraryPath().contains(socat.loader().getParent()), socat.toString());
    for (Path p : List.of(socat.socat(), socat.loader()))
      assertTrue(
          socat.mounts().stream().anyMatch(p::startsWith), p + " is under " + socat.mounts());
    for (Path d : socat.libraryPath())
      assertTrue(
          socat.mounts().stream().anyMatch(d::startsWith), d + " is under " + socat.mounts());
  }
}
