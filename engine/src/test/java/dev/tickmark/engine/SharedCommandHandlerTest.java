package dev.tickmark.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.persistence.typed.javadsl.ReplyEffect;
import org.junit.jupiter.api.Test;

/**
 * The shared table answers as Pekko's {@code CommandHandlerWithReplyBuilder} would: cases in the
 * order they were added, by state type, falling through to later state types, with conditions read
 * at every command (the table remembers which cases may match a pair of classes, never a
 * condition's answer).
 */
class SharedCommandHandlerTest {
  sealed interface State permits Idle, Busy, Done {}

  record Idle() implements State {}

  record Busy() implements State {}

  record Done() implements State {}

  sealed interface Command permits Get, Poke, Tick {}

  record Get() implements Command {}

  record Poke() implements Command {}

  enum Tick implements Command {
    SOON,
    LATE
  }

  /** An entity that records which handler answered. */
  static final class Probe {
    final List<String> answered = new ArrayList<>();
    boolean holding;

    ReplyEffect<String, State> answer(String name) {
      answered.add(name);
      return null; // what the handler returns is passed through as it is
    }

    boolean holding() {
      return holding;
    }

    ReplyEffect<String, State> onIdleGet(Idle state, Get command) {
      return answer("idle-get");
    }
  }

  private static final SharedCommandHandler<Probe, Command, String, State> TABLE =
      SharedCommandHandler.<Probe, Command, String, State>builder()
          .forStateType(Idle.class)
          .onCommand(Get.class, Probe::onIdleGet)
          .onCommand(Get.class, (p, s, c) -> p.answer("idle-get-second"))
          .onCommandWhile(Probe::holding, (p, s, c) -> p.answer("idle-held"))
          .onCommand(Poke.class, (p, s, c) -> p.answer("idle-poke"))
          .forStateType(Busy.class)
          .onCommand(c -> c == Tick.LATE, (p, s, c) -> p.answer("busy-late"))
          .onCommand(Tick.class, (p, s, c) -> p.answer("busy-tick"))
          .forStateType(State.class)
          .onCommand(Get.class, (p, s, c) -> p.answer("any-get"))
          .onCommand(Tick.class, (p, s, c) -> p.answer("any-tick"))
          .build();

  @Test
  void theFirstCaseAddedForAStateAndCommandAnswers() {
    Probe probe = new Probe();
    TABLE.apply(probe, new Idle(), new Get());
    assertEquals(List.of("idle-get"), probe.answered);
  }

  @Test
  void aStateWithoutACaseForACommandFallsThroughToALaterStateTypesCase() {
    Probe probe = new Probe();
    TABLE.apply(probe, new Busy(), new Get());
    TABLE.apply(probe, new Done(), new Get());
    TABLE.apply(probe, new Idle(), Tick.SOON);
    assertEquals(List.of("any-get", "any-get", "any-tick"), probe.answered);
  }

  @Test
  void aConditionOnTheEntityIsReadAtEveryCommandNotRemembered() {
    Probe probe = new Probe();
    TABLE.apply(probe, new Idle(), new Poke());
    probe.holding = true;
    TABLE.apply(probe, new Idle(), new Poke());
    TABLE.apply(probe, new Idle(), new Get()); // Get's own case comes first
    probe.holding = false;
    TABLE.apply(probe, new Idle(), new Poke());
    assertEquals(List.of("idle-poke", "idle-held", "idle-get", "idle-poke"), probe.answered);
  }

  @Test
  void aConditionOnTheCommandIsTestedForEachCommandOfTheSameClass() {
    Probe probe = new Probe();
    TABLE.apply(probe, new Busy(), Tick.SOON);
    TABLE.apply(probe, new Busy(), Tick.LATE);
    TABLE.apply(probe, new Busy(), Tick.SOON);
    assertEquals(List.of("busy-tick", "busy-late", "busy-tick"), probe.answered);
  }

  @Test
  void aCommandNoCaseTakesIsAProgrammingErrorThatNamesItAndTheState() {
    IllegalStateException e =
        assertThrows(
            IllegalStateException.class, () -> TABLE.apply(new Probe(), new Done(), new Poke()));
    assertTrue(e.getMessage().contains("Poke"), e.getMessage());
    assertTrue(e.getMessage().contains("Done"), e.getMessage());
  }

  @Test
  void oneTableServesManyEntitiesEachWithItsOwnFields() {
    Probe a = new Probe();
    Probe b = new Probe();
    b.holding = true;
    TABLE.apply(a, new Idle(), new Poke());
    TABLE.apply(b, new Idle(), new Poke());
    assertEquals(List.of("idle-poke"), a.answered);
    assertEquals(List.of("idle-held"), b.answered);
  }
}
