package dev.tickmark.agent;

import dev.tickmark.wire.AgentFrame;
import java.nio.file.Path;
import java.time.Instant;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Pattern;

/**
 * Runs rental workloads on this machine. Three implementations: {@link SandboxRuntime} (a
 * bubblewrap sandbox; the default without Docker and with simulated GPUs), {@link DockerRuntime} (a
 * container; real hosts) and {@link ProcessRuntime} (a plain child process; development, when asked
 * for). All give each rental a scratch folder {@code <state-dir>/rentals/<rental id>/scratch},
 * created empty (mode 0700) at the start and wiped when the rental ends, whatever the reason, and
 * tell every workload in {@code TICKMARK_NOTICE_FILE} where its spot notice appears ({@link
 * #notice}).
 *
 * <p>Thread-safe; the futures complete on the runtime's own threads, never on the caller's.
 *
 * <p>(The name shadows {@code java.lang.Runtime} inside this package: write {@code
 * java.lang.Runtime} there.)
 */
interface Runtime extends AutoCloseable {

  /** Rental ids become folder and container names: nothing else is accepted. */
  Pattern RENTAL_ID = Pattern.compile("[A-Za-z0-9_-]{1,128}");

  /** At most this many command arguments (a start_rental frame is at most 64 KiB anyway). */
  int MAX_COMMAND_ARGS = 4096;

  /**
   * What to run: the parts of {@code start_rental} a runtime uses. {@code fill}: what goes into the
   * fresh scratch folder before the command starts (a restored snapshot); null: it starts empty.
   */
  record Spec(
      String rentalId,
      List<Integer> cards,
      String image,
      List<String> command,
      boolean network,
      Fill fill) {
    public Spec {
      cards = cards == null ? List.of() : List.copyOf(cards);
      command =
          command == null
              ? List.of()
              : java.util.Collections.unmodifiableList(new java.util.ArrayList<>(command));
    }

    Spec(
        String rentalId, List<Integer> cards, String image, List<String> command, boolean network) {
      this(rentalId, cards, image, command, network, null);
    }

    static Spec of(AgentFrame.StartRental s) {
      return new Spec(s.rentalId(), s.cards(), s.image(), s.command(), s.network());
    }

    Spec withFill(Fill fill) {
      return new Spec(rentalId, cards, image, command, network, fill);
    }
  }

  /**
   * Fills a fresh, empty scratch folder (as the agent's user, on a runtime's worker thread) before
   * the workload starts; the runtime then makes its content the workload's, as it does the folder.
   */
  interface Fill {
    /** Throws with a message fit for a {@code rental_failed} reason when it cannot. */
    void into(Path scratch) throws java.io.IOException;
  }

  /** A workload that started. */
  interface Handle {
    String rentalId();

    /** When the workload started running. */
    Instant startedAt();

    /**
     * Completes once the workload has ended (by itself, or stopped) and its scratch folder is
     * wiped, with the instant it stopped running. Never completes exceptionally.
     */
    CompletableFuture<Instant> ended();

    /**
     * How the workload's main process ended, once {@link #ended()} has completed: its exit status
     * (0–255; 128 + N when signal N ended it, as a shell reports it). Null while it runs, and when
     * the runtime could not learn it.
     */
    default Integer exitCode() {
      return null;
    }
  }

  /**
   * A workload that could not be started; {@link #getMessage()} is the {@code rental_failed}
   * reason.
   */
  final class Failure extends RuntimeException {
    Failure(String reason) {
      super(reason);
    }

    Failure(String reason, Throwable cause) {
      super(reason, cause);
    }
  }

  /** {@code sandbox}, {@code docker} or {@code process}, for logs and the hardware report. */
  String name();

  /**
   * Whether a rental that asks for outbound network can run here; the hardware report says so, and
   * the engine matches such rentals only to hosts that can.
   */
  default boolean offersNetwork() {
    return true;
  }

  /**
   * Starts a workload. Fails with {@link Failure} (the reason is safe to send to the node) when it
   * cannot: an invalid spec, a missing executable, a container engine that refuses it. Never starts
   * two workloads for one rental id.
   */
  CompletableFuture<Handle> start(Spec spec);

  /**
   * Starts a workload whose stdout and stderr go, line by line, to {@code log} (closed once the
   * output has ended, before {@link Handle#ended()} completes). A runtime that cannot capture
   * output ignores it.
   */
  default CompletableFuture<Handle> start(Spec spec, RentalLog log) {
    return start(spec);
  }

  /**
   * Stops a workload: asks it to end (SIGTERM), waits up to the grace period, then kills it; its
   * scratch folder is wiped. Completes with the instant it stopped, or with null at once when no
   * workload of that id is running.
   */
  CompletableFuture<Instant> stop(String rentalId);

  /**
   * {@link #stop}, keeping the scratch folder when {@code keepWorkspace} (a snapshot is to be made
   * of it, {@link RentalDirs#kept}) instead of wiping it.
   */
  default CompletableFuture<Instant> stop(String rentalId, boolean keepWorkspace) {
    return stop(rentalId);
  }

  /**
   * Writes the spot notice ({@link #noticeJson}) to the running workload's {@code
   * TICKMARK_NOTICE_FILE}, replacing an earlier one atomically. Quick (a small local file), so it
   * may be called on the agent's loop. False when the workload does not run or the file cannot be
   * written (logged).
   */
  default boolean notice(String rentalId, Instant deadline) {
    return false;
  }

  /**
   * Asks a running workload to end (SIGTERM) without stopping it: it runs on until it exits by
   * itself or is {@link #stop stopped}. Completes with whether the signal was sent; false at once
   * when the workload does not run or is being stopped.
   */
  default CompletableFuture<Boolean> terminate(String rentalId) {
    return CompletableFuture.completedFuture(false);
  }

  /** The notice file's content: one JSON object and a newline. */
  static String noticeJson(String rentalId, Instant deadline) {
    // a valid rental id and an ISO-8601 instant need no JSON escaping
    if (checkRentalId(rentalId) != null) throw new IllegalArgumentException("invalid rental id");
    return "{\"type\":\"preemption\",\"deadline\":\""
        + deadline
        + "\",\"rental_id\":\""
        + rentalId
        + "\"}\n";
  }

  /**
   * Where the SSH sessions of a running workload run (what the workload sees); empty when it does
   * not run, or the runtime offers no sessions.
   */
  default java.util.Optional<dev.tickmark.agent.ssh.Workspace> workspace(String rentalId) {
    return java.util.Optional.empty();
  }

  /** The ids of the workloads running now. */
  Set<String> running();

  /**
   * Stops every running workload and waits for them (bounded by the grace period plus a few
   * seconds).
   */
  @Override
  void close();

  // ---- validation shared by the runtimes and the rental state machine

  /** Null when {@code id} is a usable rental id, else why not. */
  static String checkRentalId(String id) {
    if (id == null || id.isEmpty()) return "no rental id";
    if (!RENTAL_ID.matcher(id).matches())
      return "invalid rental id (expected 1-128 of A-Z a-z 0-9 _ -)";
    return null;
  }

  /**
   * Null when {@code cards} is a non-empty list of distinct cards of this machine ({@code known}),
   * else why not.
   */
  static String checkCards(List<Integer> cards, Set<Integer> known) {
    if (cards == null || cards.isEmpty()) return "no cards given";
    Set<Integer> seen = new HashSet<>();
    for (Integer card : cards) {
      if (card == null || card < 0) return "invalid card index " + card;
      if (!seen.add(card)) return "card " + card + " given twice";
      if (known != null && !known.contains(card)) {
        return "card "
            + card
            + " is not on this host (cards: "
            + known.stream()
                .sorted()
                .map(String::valueOf)
                .collect(java.util.stream.Collectors.joining(", "))
            + ")";
      }
    }
    return null;
  }

  /** Null when the command's arguments can be passed to a program, else why not. */
  static String checkCommand(List<String> command) {
    if (command.size() > MAX_COMMAND_ARGS)
      return "the command has more than " + MAX_COMMAND_ARGS + " arguments";
    for (String arg : command) {
      if (arg == null) return "the command has a null argument";
      if (arg.indexOf('\0') >= 0) return "the command has an argument with a NUL character";
    }
    return null;
  }

  /** A short, single-line version of a tool's message, fit for a {@code rental_failed} reason. */
  static String oneLine(String text, int max) {
    if (text == null) return "";
    String last = "";
    for (String line : text.split("\\R")) if (!line.isBlank()) last = line.strip();
    StringBuilder sb = new StringBuilder();
    last.codePoints().filter(c -> c >= 0x20 && c != 0x7f).forEach(sb::appendCodePoint);
    return sb.length() > max ? sb.substring(0, max) + "…" : sb.toString();
  }
}
