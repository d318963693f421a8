package dev.tickmark.engine.host;

import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What one incarnation of a host entity knows of the workloads its agent lists in heartbeats, and
 * the rules that turn a heartbeat's listing into the bound of a rental's bill: the latest heartbeat
 * that listed each rental holding cards here and still listed by the last one. The rentals no
 * longer listed are in the state ({@link Host.Inventory#unlisted()}), so their bound survives a
 * restart; this memory does not, and {@link #assumeListedAtRecovery} stands in for it.
 */
final class WorkloadListings {
  private final Map<String, Instant> listedAt = new HashMap<>();

  /**
   * The workloads of rentals running here (confirmed) when this incarnation recovered are taken as
   * last listed by the last heartbeat in the journal, so that the first heartbeat that omits one
   * marks it gone: the heartbeats this entity heard after that record are lost with its previous
   * incarnation, and one that no longer listed the workload may be among them. Unconfirmed
   * reservations are left out: their workload may not have started yet.
   */
  void assumeListedAtRecovery(Host.Active state) {
    Instant recorded = state.presence().lastHeartbeatAt();
    if (recorded == null) return;
    state
        .reservations()
        .forEach(
            (rentalId, held) -> {
              if (held.confirmed() && !state.inventory().unlisted().containsKey(rentalId))
                listedAt.put(rentalId, recorded);
            });
  }

  /**
   * The rentals holding cards here that a heartbeat lists were running at its arrival ({@code at});
   * the returned events record those it no longer lists, the first time. Once unlisted a rental
   * stays so: the agent never runs a rental's workload twice (it wipes leftovers when it starts),
   * so a later listing would prove nothing about the seconds in between.
   *
   * <p>A heartbeat of the live session ({@code live}) comes after every earlier one of it (its
   * sequence number), so omitting a rental listed before proves the workload gone. Otherwise a
   * rental is gone once the agent omits it from a heartbeat it stamped ({@code agentAt}) after the
   * rental's {@code listed_from} ({@link Host.Held#wouldBeListedBy}): the agent lists a running
   * workload in every heartbeat it stamps after that instant, so an older heartbeat that arrives
   * late cannot be taken for one. Its bill then stops at the last listing known, or where the agent
   * last said it ran: at its start.
   *
   * <p>A heartbeat the incarnation refuses (not {@code live}: it knows no session, having restarted
   * or moved) still comes from the host's authenticated agent. It proves nothing of the host for
   * billing, but its listings are the latest known: without them, a workload listed only there and
   * gone by the next session would never be bounded. Its omissions count only by the stamp, since
   * it may be a late one of a session long replaced; without them, a workload taken as listed at
   * recovery that died just before the restart was billed on until the next session's heartbeat
   * proved the renter's stop (the simulation's seed 4, docs/simulation.md). {@code rentals} null:
   * the agent does not list its workloads, and nothing is learnt.
   */
  List<Host.WorkloadUnlisted> noteHeartbeat(
      Host.Active state, List<String> rentals, Instant agentAt, Instant at, boolean live) {
    listedAt.keySet().retainAll(state.reservations().keySet());
    if (rentals == null) return List.of();
    List<Host.WorkloadUnlisted> unlisted = new ArrayList<>(0);
    state
        .reservations()
        .forEach(
            (rentalId, held) -> {
              if (state.inventory().unlisted().containsKey(rentalId)) return;
              if (rentals.contains(rentalId)) {
                listedAt.put(rentalId, at);
              } else if ((live && listedAt.containsKey(rentalId))
                  || held.wouldBeListedBy(agentAt)) {
                Instant listed = listedAt.remove(rentalId);
                unlisted.add(
                    new Host.WorkloadUnlisted(
                        rentalId, listed != null ? listed : held.startedAt(), at));
              }
            });
    return unlisted;
  }

  /**
   * Whether a heartbeat that omits the rental's workload would prove nothing here: the host holds
   * its cards but was never told the workload runs (no confirmation, so no {@code listed_from}),
   * and no heartbeat this incarnation heard has listed it (simulation finding X).
   */
  boolean blindTo(Host.Active state, String rentalId) {
    Host.Held held = state.reservations().get(rentalId);
    return held != null && !held.confirmed() && lastListed(state, rentalId) == null;
  }

  /** The latest heartbeat known to list the rental's workload (null: none known). */
  Instant lastListed(Host.Active state, String rentalId) {
    Host.Unlisted unlisted = state.inventory().unlisted().get(rentalId);
    return unlisted != null ? unlisted.listedAt() : listedAt.get(rentalId);
  }
}
