package dev.tickmark.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code deploy/agent/install.sh} run into a throwaway root ({@code --root}) with stand-ins for
 * {@code systemctl}, {@code useradd} and {@code userdel} that record their calls (useradd adds the
 * user to the root's {@code /etc/passwd} with this test's own uid, so that its chown works), and
 * the unit it writes checked with {@code systemd-analyze verify} where that can run.
 */
class InstallScriptTest {
  private static final Path SCRIPT = Path.of("..", "deploy", "agent", "install.sh");
  private static final String UNIT = "etc/systemd/system/tickmark-agent.service";
  private static final String ENV = "etc/tickmark-agent/agent.env";
  private static final String STATE = "var/lib/tickmark-agent";

  @TempDir Path tmp;
  private Path root;
  private Path calls;
  private Path bin;
  private Path jar;
  private final String java =
      ProcessHandle.current().info().command().orElse("/usr/bin/java"); // this JVM: it exists

  record Result(int status, String output) {}

  @BeforeEach
  void throwawayRoot() throws Exception {
    root = Files.createDirectories(tmp.resolve("root"));
    Files.createDirectories(root.resolve("etc"));
    Files.writeString(root.resolve("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
    Files.writeString(root.resolve("etc/group"), "root:x:0:\ndocker:x:998:\n");
    calls = tmp.resolve("calls");
    bin = Files.createDirectories(tmp.resolve("bin"));
    fake("systemctl", "");
    fake(
        "useradd",
        """
        r=; while [ $# -gt 0 ]; do [ "$1" = --root ] && r=$2; shift; done
        echo "tickmark-agent:x:$(id -u):$(id -g)::/var/lib/tickmark-agent:/usr/sbin/nologin" >> "$r/etc/passwd"
        echo "tickmark-agent:x:$(id -g):" >> "$r/etc/group"
        """);
    fake(
        "userdel",
        """
        r=; while [ $# -gt 0 ]; do [ "$1" = --root ] && r=$2; shift; done
        for f in passwd group; do
          grep -v '^tickmark-agent:' "$r/etc/$f" > "$r/etc/$f.new"; mv "$r/etc/$f.new" "$r/etc/$f"
        done
        """);
    jar = Files.writeString(tmp.resolve("tickmark-agent.jar"), "not really a jar");
  }

  private void fake(String name, String body) throws IOException {
    Path p = bin.resolve(name);
    Files.writeString(p, "#!/bin/sh\necho \"" + name + " $*\" >> " + calls + "\n" + body);
    Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwx------"));
  }

  private Result install(String... args) throws Exception {
    List<String> argv =
        new ArrayList<>(List.of("bash", SCRIPT.toString(), "--root", root.toString()));
    argv.addAll(List.of(args));
    ProcessBuilder pb =
        new ProcessBuilder(argv)
            .redirectErrorStream(true)
            .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    pb.environment().put("SYSTEMCTL", bin.resolve("systemctl").toString());
    pb.environment().put("USERADD", bin.resolve("useradd").toString());
    pb.environment().put("USERDEL", bin.resolve("userdel").toString());
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS));
    return new Result(p.exitValue(), out);
  }

  private Result firstInstall() throws Exception {
    Result r =
        install(
            "--engine",
            "wss://node1:8080",
            "--engine",
            "wss://node2:8443",
            "--token",
            "tmkreg_host_1_secret",
            "--jar",
            jar.toString(),
            "--java",
            java);
    assertEquals(0, r.status(), r.output());
    return r;
  }

  private List<String> calls() throws IOException {
    return Files.exists(calls) ? Files.readAllLines(calls) : List.of();
  }

  private String mode(String path) throws IOException {
    return PosixFilePermissions.toString(Files.getPosixFilePermissions(root.resolve(path)));
  }

  private long uid() throws Exception {
    return ((Number) Files.getAttribute(Path.of("/proc/self"), "unix:uid")).longValue();
  }

  // ---- the tests

  @Test
  void installsTheJarTheUnitTheEnvironmentFileAndTheStateFolderThenStartsIt() throws Exception {
    firstInstall();

    assertEquals(
        List.of(
            "useradd --root "
                + root
                + " --system --user-group --home-dir /var/lib/tickmark-agent --no-create-home"
                + " --shell /usr/sbin/nologin tickmark-agent",
            "systemctl daemon-reload",
            "systemctl enable tickmark-agent.service",
            "systemctl restart tickmark-agent.service"),
        calls());
    assertEquals(
        "not really a jar",
        Files.readString(root.resolve("opt/tickmark-agent/tickmark-agent.jar")));
    assertEquals("rw-r--r--", mode("opt/tickmark-agent/tickmark-agent.jar"));
    assertEquals("rw-r--r--", mode(UNIT));
    assertEquals("rwxr-x---", mode("etc/tickmark-agent"));
    assertEquals("rw-r-----", mode(ENV), "the token: root and the service's group only");
    assertEquals("rwx------", mode(STATE));
    assertEquals(uid(), ((Number) Files.getAttribute(root.resolve(STATE), "unix:uid")).longValue());
    String env = Files.readString(root.resolve(ENV));
    assertTrue(env.contains("\nTICKMARK_AGENT_ENGINE=wss://node1:8080,wss://node2:8443\n"), env);
    assertTrue(env.contains("\nTICKMARK_AGENT_TOKEN=tmkreg_host_1_secret\n"), env);

    List<String> unit = Files.readAllLines(root.resolve(UNIT));
    for (String line :
        List.of(
            "User=tickmark-agent",
            "Group=tickmark-agent",
            "SupplementaryGroups=docker",
            "EnvironmentFile=/etc/tickmark-agent/agent.env",
            "ExecStart="
                + java
                + " -jar /opt/tickmark-agent/tickmark-agent.jar --engine ${TICKMARK_AGENT_ENGINE}"
                + " --state-dir /var/lib/tickmark-agent",
            "Restart=on-failure",
            "RestartPreventExitStatus=2 3",
            "KillMode=mixed",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ReadWritePaths=/var/lib/tickmark-agent",
            "PrivateTmp=yes",
            "ProtectHome=yes",
            "WantedBy=multi-user.target")) assertTrue(unit.contains(line), line + " in " + unit);
    assertFalse(
        String.join("\n", unit).contains("tmkreg_"), "the token is in the env file, not the unit");
  }

  @Test
  void aReinstallKeepsTheTokenAndTheUserAndRestarts() throws Exception {
    firstInstall();
    Files.delete(calls);
    Result again = install("--engine", "wss://node3:8080", "--jar", jar.toString(), "--java", java);
    assertEquals(0, again.status(), again.output());
    assertEquals(
        List.of(
            "systemctl daemon-reload",
            "systemctl enable tickmark-agent.service",
            "systemctl restart tickmark-agent.service"),
        calls(),
        "no second user");
    String env = Files.readString(root.resolve(ENV));
    assertTrue(env.contains("TICKMARK_AGENT_ENGINE=wss://node3:8080\n"), env);
    assertTrue(env.contains("TICKMARK_AGENT_TOKEN=tmkreg_host_1_secret\n"), env);
  }

  @Test
  void refusedWithoutATokenOnTheFirstInstallOrWithABadEngineAndNothingIsWritten() throws Exception {
    Result noToken =
        install("--engine", "wss://node1:8080", "--jar", jar.toString(), "--java", java);
    assertNotEquals(0, noToken.status());
    assertTrue(noToken.output().contains("needs --token"), noToken.output());
    Result badEngine =
        install(
            "--engine", "node1 --runtime process", "--token", "tmkreg_x", "--jar", jar.toString());
    assertNotEquals(0, badEngine.status());
    Result badToken =
        install("--engine", "wss://node1:8080", "--token", "x; rm -rf /", "--jar", jar.toString());
    assertNotEquals(0, badToken.status());
    Result noJar =
        install(
            "--engine",
            "wss://n:1",
            "--token",
            "tmkreg_x",
            "--jar",
            tmp.resolve("none").toString(),
            "--java",
            java);
    assertNotEquals(0, noJar.status());
    assertTrue(noJar.output().contains("no agent jar"), noJar.output());
    Result plain =
        install(
            "--engine",
            "ws://node1:8080",
            "--token",
            "tmkreg_x",
            "--jar",
            jar.toString(),
            "--java",
            java);
    assertNotEquals(0, plain.status(), "the agent would refuse it on every start");
    assertTrue(plain.output().contains("use wss://"), plain.output());
    assertFalse(Files.exists(root.resolve(UNIT)));
    assertFalse(Files.exists(root.resolve(ENV)));
    assertEquals(List.of(), calls());
  }

  @Test
  void aPlainEngineOffLoopbackNeedsInsecureWhichTheServiceThenPassesOn() throws Exception {
    Result installed =
        install(
            "--engine",
            "ws://node1:8080",
            "--insecure",
            "--token",
            "tmkreg_host_1_secret",
            "--jar",
            jar.toString(),
            "--java",
            java);
    assertEquals(0, installed.status(), installed.output());
    String unit = Files.readString(root.resolve(UNIT));
    assertTrue(unit.contains("--state-dir /var/lib/tickmark-agent --insecure"), unit);
  }

  @Test
  void aCaBundleIsCopiedAndTheServiceTrustsItAlsoAfterAReinstallWithoutIt() throws Exception {
    Path junk = root.resolve("junk.pem");
    Files.writeString(junk, "no certificate\n");
    Result refused =
        install(
            "--engine",
            "wss://node1:8080",
            "--token",
            "tmkreg_host_1_secret",
            "--ca",
            junk.toString(),
            "--jar",
            jar.toString(),
            "--java",
            java);
    assertEquals(1, refused.status(), refused.output());
    assertTrue(refused.output().contains("holds no PEM certificate"), refused.output());
    Path ca = root.resolve("ca-bundle.pem");
    Files.writeString(
        ca, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"); // copied as is
    Result installed =
        install(
            "--engine",
            "wss://node1:8080",
            "--token",
            "tmkreg_host_1_secret",
            "--ca",
            ca.toString(),
            "--jar",
            jar.toString(),
            "--java",
            java);
    assertEquals(0, installed.status(), installed.output());
    assertEquals(Files.readString(ca), Files.readString(root.resolve("etc/tickmark-agent/ca.pem")));
    assertEquals("rw-r--r--", mode("etc/tickmark-agent/ca.pem"));
    String unit = Files.readString(root.resolve(UNIT));
    assertTrue(unit.contains(" --ca /etc/tickmark-agent/ca.pem"), unit);
    assertEquals(0, firstInstall().status()); // again, without --ca
    assertTrue(Files.readString(root.resolve(UNIT)).contains(" --ca /etc/tickmark-agent/ca.pem"));
  }

  @Test
  void uninstallIsRefusedWhileRentalsRunThenStopsTheServiceAndRemovesEverything() throws Exception {
    firstInstall();
    Files.createDirectories(root.resolve(STATE).resolve("rentals/rnt_7/scratch"));
    Files.writeString(root.resolve(STATE).resolve("host-credential"), "secret");
    Files.delete(calls);

    Result refused = install("--uninstall");
    assertNotEquals(0, refused.status());
    assertTrue(
        refused.output().contains("rnt_7") && refused.output().contains("drain"), refused.output());
    assertEquals(List.of(), calls());
    assertTrue(Files.exists(root.resolve(UNIT)));

    Result forced = install("--uninstall", "--force");
    assertEquals(0, forced.status(), forced.output());
    assertEquals(
        List.of(
            "systemctl stop tickmark-agent.service",
            "systemctl disable tickmark-agent.service",
            "systemctl daemon-reload",
            "userdel --root " + root + " tickmark-agent"),
        calls());
    for (String gone : List.of(UNIT, "etc/tickmark-agent", "opt/tickmark-agent", STATE))
      assertFalse(Files.exists(root.resolve(gone)), gone);
    assertFalse(Files.readString(root.resolve("etc/passwd")).contains("tickmark-agent"));
  }

  @Test
  void uninstallCanKeepTheStateFolderForALaterReinstallWithoutAToken() throws Exception {
    firstInstall();
    Files.writeString(root.resolve(STATE).resolve("host-credential"), "secret");
    Result r = install("--uninstall", "--keep-state");
    assertEquals(0, r.status(), r.output());
    assertTrue(Files.exists(root.resolve(STATE).resolve("host-credential")));
    assertFalse(Files.exists(root.resolve(UNIT)));
    Result again = install("--engine", "wss://node1:8080", "--jar", jar.toString(), "--java", java);
    assertEquals(0, again.status(), "the credential is there: no token needed: " + again.output());
  }

  @Test
  void theUnitPassesSystemdAnalyzeVerify() throws Exception {
    Path analyze = Path.of("/usr/bin/systemd-analyze");
    Assumptions.assumeTrue(
        Files.isExecutable(analyze), "no systemd-analyze: the unit file is not verified");
    // it must be able to run here at all: a plain unit first
    Path plain = Files.createDirectories(tmp.resolve("plain")).resolve("tickmark-plain.service");
    Files.writeString(plain, "[Service]\nExecStart=" + java + " -version\n");
    Result sanity = run(List.of(analyze.toString(), "verify", plain.toString()));
    Assumptions.assumeTrue(
        sanity.status() == 0,
        "systemd-analyze verify cannot run in this container: " + sanity.output());

    firstInstall();
    // verify reads the unit where it is; the paths it names are the real system's, and only the
    // executable is checked there (this JVM)
    Path copy = Files.createDirectories(tmp.resolve("units")).resolve("tickmark-agent.service");
    Files.copy(root.resolve(UNIT), copy);
    Result verified = run(List.of(analyze.toString(), "verify", copy.toString()));
    assertEquals(0, verified.status(), verified.output());
    assertFalse(verified.output().contains("tickmark-agent.service"), verified.output());

    // and it would say so: the same unit with a missing java fails
    Files.writeString(copy, Files.readString(copy).replace(java, "/nonexistent/java"));
    assertNotEquals(0, run(List.of(analyze.toString(), "verify", copy.toString())).status());
  }

  private static Result run(List<String> argv) throws Exception {
    Process p =
        new ProcessBuilder(argv)
            .redirectErrorStream(true)
            .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
            .start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS));
    return new Result(p.exitValue(), out);
  }
}
