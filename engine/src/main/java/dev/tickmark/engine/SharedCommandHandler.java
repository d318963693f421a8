package dev.tickmark.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiPredicate;
import java.util.function.Predicate;
import org.apache.pekko.persistence.typed.javadsl.ReplyEffect;

/**
 * An entity's command handler built once per entity class and shared by all its instances, with the
 * shape and the meaning of Pekko's {@code CommandHandlerWithReplyBuilder}: cases grouped by state
 * type, tried in the order they were added, the first whose state type and command match answers (a
 * state with no case for a command falls through to a later group's, as with {@code orElse}).
 *
 * <p>Why not Pekko's builder: its handlers close over the entity, so every instance builds its own
 * table: 56 command cases a {@code Rental}, each with two closures and a list cell, about half of a
 * running rental's heap with its (equally per-entity) event handler (docs/benchmarks.md, "A
 * rental's command handler, built once"). Here each handler takes the entity as its first argument,
 * so one table serves every rental and an entity holds one lambda (its {@code commandHandler()}:
 * {@code (state, command) -> COMMANDS.apply(this, state, command)}). Dispatch looks up the cases
 * that can match a state's and a command's classes once per pair of classes, instead of testing
 * every case in turn.
 *
 * @param <E> the entity class
 */
public final class SharedCommandHandler<E, Command, Event, State> {

  /** One case's handler: the entity, its state (of the case's state type) and the command. */
  @FunctionalInterface
  public interface Handler<E, S, C, Event, State> {
    ReplyEffect<Event, State> apply(E entity, S state, C command);
  }

  /** {@code commandType} null: any command; {@code when} null: no further condition. */
  private record Case<E, Command, Event, State>(
      Class<?> stateType,
      Class<?> commandType,
      BiPredicate<E, Command> when,
      Handler<E, Object, Object, Event, State> handler) {

    boolean mayMatch(Class<?> stateClass, Class<?> commandClass) {
      return stateType.isAssignableFrom(stateClass)
          && (commandType == null || commandType.isAssignableFrom(commandClass));
    }
  }

  private final List<Case<E, Command, Event, State>> cases;

  /** State class → command class → the cases that may match that pair, in order. */
  private final Map<Class<?>, Map<Class<?>, List<Case<E, Command, Event, State>>>> byClasses =
      new ConcurrentHashMap<>();

  private SharedCommandHandler(List<Case<E, Command, Event, State>> cases) {
    this.cases = List.copyOf(cases);
  }

  public static <E, Command, Event, State> Builder<E, Command, Event, State> builder() {
    return new Builder<>();
  }

  /**
   * The effect of the first case that matches, as Pekko's built handler gives it.
   *
   * @throws IllegalStateException no case matches (a missing {@code onAnyCommand}): the same
   *     programming error Pekko's handler reports with a {@code MatchError}
   */
  public ReplyEffect<Event, State> apply(E entity, State state, Command command) {
    List<Case<E, Command, Event, State>> candidates =
        byClasses
            .computeIfAbsent(state.getClass(), s -> new ConcurrentHashMap<>())
            .computeIfAbsent(command.getClass(), c -> candidates(state.getClass(), c));
    for (Case<E, Command, Event, State> c : candidates)
      if (c.when() == null || c.when().test(entity, command))
        return c.handler().apply(entity, state, command);
    throw new IllegalStateException(
        "no handler for command "
            + command.getClass().getName()
            + " in state "
            + state.getClass().getName());
  }

  private List<Case<E, Command, Event, State>> candidates(
      Class<?> stateClass, Class<?> commandClass) {
    List<Case<E, Command, Event, State>> found = new ArrayList<>();
    for (Case<E, Command, Event, State> c : cases)
      if (c.mayMatch(stateClass, commandClass)) found.add(c);
    return List.copyOf(found);
  }

  /** Collects the cases, state type by state type. */
  public static final class Builder<E, Command, Event, State> {
    private final List<Case<E, Command, Event, State>> cases = new ArrayList<>();

    private Builder() {}

    /** The cases that follow apply to states of {@code type} (and its subtypes). */
    public <S extends State> ForState<E, S, Command, Event, State> forStateType(Class<S> type) {
      return new ForState<>(this, type);
    }

    public SharedCommandHandler<E, Command, Event, State> build() {
      return new SharedCommandHandler<>(cases);
    }

    @SuppressWarnings("unchecked")
    private void add(
        Class<?> stateType,
        Class<?> commandType,
        BiPredicate<E, Command> when,
        Handler<E, ?, ?, Event, State> handler) {
      cases.add(
          new Case<>(
              stateType, commandType, when, (Handler<E, Object, Object, Event, State>) handler));
    }
  }

  /** The cases of one state type. */
  public static final class ForState<E, S extends State, Command, Event, State> {
    private final Builder<E, Command, Event, State> builder;
    private final Class<S> stateType;

    private ForState(Builder<E, Command, Event, State> builder, Class<S> stateType) {
      this.builder = builder;
      this.stateType = stateType;
    }

    /** Commands of {@code type}. */
    public <C extends Command> ForState<E, S, Command, Event, State> onCommand(
        Class<C> type, Handler<E, S, C, Event, State> handler) {
      builder.add(stateType, type, null, handler);
      return this;
    }

    /** Commands that {@code when} accepts (it sees the command only). */
    public ForState<E, S, Command, Event, State> onCommand(
        Predicate<Command> when, Handler<E, S, Command, Event, State> handler) {
      builder.add(stateType, null, (entity, command) -> when.test(command), handler);
      return this;
    }

    /** Any command, while {@code when} holds for the entity (e.g. a launch is under way). */
    public ForState<E, S, Command, Event, State> onCommandWhile(
        Predicate<E> when, Handler<E, S, Command, Event, State> handler) {
      builder.add(stateType, null, (entity, command) -> when.test(entity), handler);
      return this;
    }

    /** Every command no earlier case of this state type took. */
    public ForState<E, S, Command, Event, State> onAnyCommand(
        Handler<E, S, Command, Event, State> handler) {
      builder.add(stateType, null, null, handler);
      return this;
    }

    /** The cases that follow apply to states of {@code type}. */
    public <S2 extends State> ForState<E, S2, Command, Event, State> forStateType(Class<S2> type) {
      return builder.forStateType(type);
    }

    public SharedCommandHandler<E, Command, Event, State> build() {
      return builder.build();
    }
  }
}
