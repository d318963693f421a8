package dev.tickmark.agent;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs the vendor tools. A missing tool, a timeout or an I/O failure is "no output", never an
 * exception.
 */
interface Commands {

  /** What a finished command printed on stdout, with its exit status. */
  record Output(int exitCode, String stdout) {}

  /**
   * Empty when the tool is not installed, could not be started, or did not finish within {@code
   * timeout}.
   */
  Optional<Output> run(List<String> command, Duration timeout);

  /** Real processes; stderr is discarded (warnings there must not end up in parsed output). */
  Commands PROCESSES =
      new Commands() {
        private static final int MAX_OUTPUT_BYTES = 4 * 1024 * 1024;
        private final Logger log = LoggerFactory.getLogger(Commands.class);

        @Override
        public Optional<Output> run(List<String> command, Duration timeout) {
          Process process;
          try {
            process =
                new ProcessBuilder(command)
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                    .redirectError(ProcessBuilder.Redirect.DISCARD)
                    .start();
          } catch (IOException e) {
            log.debug("{} is not available: {}", command.get(0), e.getMessage());
            return Optional.empty();
          }
          CompletableFuture<String> stdout =
              CompletableFuture.supplyAsync(
                  () -> readAll(process.getInputStream()),
                  r -> {
                    Thread reader = new Thread(r, "tickmark-agent-command-output");
                    reader.setDaemon(true);
                    reader.start();
                  });
          try {
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
              log.warn(
                  "{} did not finish within {} s; ignoring it",
                  command.get(0),
                  timeout.toSeconds());
              process.descendants().forEach(ProcessHandle::destroyForcibly);
              process.destroyForcibly();
              return Optional.empty();
            }
            return Optional.of(
                new Output(
                    process.exitValue(), stdout.get(timeout.toMillis(), TimeUnit.MILLISECONDS)));
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
            return Optional.empty();
          } catch (ExecutionException | TimeoutException e) {
            process.destroyForcibly();
            return Optional.empty();
          }
        }

        private String readAll(InputStream in) {
          try (in) {
            byte[] bytes = in.readNBytes(MAX_OUTPUT_BYTES);
            in.transferTo(java.io.OutputStream.nullOutputStream());
            return new String(bytes, StandardCharsets.UTF_8);
          } catch (IOException e) {
            return "";
          }
        }
      };
}
