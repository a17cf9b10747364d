"""Machines' power states switched through the protocol, as Batsim 4.2.1 does under ``-E``.

Why: Batsim users study switching machines off. A host's ``sleep_pstates`` property
(``"1:2:3"``: sleep state 1, entered through virtual state 2, left through virtual state
3; comma-separated for several) makes its power states of three kinds: *computation*
(every state not named there — jobs run only in those), *sleep*, and *transition*
(virtual). SET_RESOURCE_STATE ``{"resources": "2-3", "state": "1"}`` then:

- computation → computation: the new speed at once, RESOURCE_STATE_CHANGED in the same
  message;
- computation → sleep: the machine passes into the sleep state's switch-off virtual
  state and computes 1 flop there (its time and energy are the switch's cost), then
  sleeps; sleep → computation through the switch-on virtual state likewise. The
  machines of one request are reported together (RESOURCE_STATE_CHANGED) when the last
  one is done, its notice having reached the server like a job's completion.

Batsim's traces: ``_pstate_changes.csv`` gets a row per request (``-2`` going to sleep,
``-1`` to a computation state) and one when a request is done (the target state);
``_consumed_energy.csv`` a ``p`` row at both. ``wattage_off`` is SimGrid's power of a
host turned off, which Batsim never does: it is read by nobody here either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from procset import ProcSet

from simulator.network import PlatformError

COMPUTATION, SLEEP, TRANSITION = "computation", "sleep", "transition"
_TRANSITION_ROW = {COMPUTATION: -1, SLEEP: -2}  # else -42 (Batsim's "unknown")


@dataclass(frozen=True)
class HostPstates:
    kinds: tuple[str, ...]  # per power state
    sleep: dict[int, tuple[int, int]]  # sleep state → (switch-off state, switch-on state)


def host_pstates(properties: dict[str, str], speeds: tuple[float, ...], where: str) -> HostPstates:
    """A host's power-state kinds from ``sleep_pstates`` (``sleep:off:on``), read as
    Batsim's ``machines.cpp`` reads it: refused where it aborts, accepted where it only
    logs an error (a sleep state named twice: the last triplet wins; ``1:1:1`` makes
    state 1 a transition)."""
    count = len(speeds)
    kinds: dict[int, str] = {}
    sleep: dict[int, tuple[int, int]] = {}
    text = properties.get("sleep_pstates")
    for triplet in re.split(r",+", text) if text is not None else ():
        parts = re.split(r":+", triplet)  # boost::split with token_compress_on
        if len(parts) != 3:
            raise PlatformError(
                f"{where}: sleep_pstates {text!r}: {triplet!r} is not 'sleep:off:on' (three "
                "power states: the sleep state, its switch-off and switch-on virtual states)"
            )
        if not all(part.strip().isdigit() for part in parts):
            raise PlatformError(
                f"{where}: sleep_pstates {text!r}: {triplet!r} is not three unsigned integers"
            )
        sleep_ps, off_ps, on_ps = (int(part) for part in parts)
        for ps in (sleep_ps, on_ps, off_ps):
            if ps >= count:
                raise PlatformError(
                    f"{where}: sleep_pstates {text!r}: power state {ps} does not exist "
                    f"(the host has {count})"
                )
        for ps in (on_ps, off_ps):
            if kinds.get(ps, TRANSITION) != TRANSITION:
                raise PlatformError(
                    f"{where}: sleep_pstates {text!r}: power state {ps} is a transition and "
                    "a sleep state (Batsim: 'combinations are forbidden')"
                )
        sleep[sleep_ps] = (off_ps, on_ps)
        kinds[sleep_ps] = SLEEP
        kinds[on_ps] = kinds[off_ps] = TRANSITION
    result = tuple(kinds.get(ps, COMPUTATION) for ps in range(count))
    for ps, kind in enumerate(result):
        if kind == COMPUTATION and not speeds[ps] > 0:
            raise PlatformError(
                f"{where}: computation power state {ps} has speed {speeds[ps]} (Batsim: 'an "
                "invalid (non-positive computing speed) computing pstate')"
            )
    return HostPstates(result, sleep)


@dataclass
class _Switch:
    machines: ProcSet
    waiting: set[int]


@dataclass
class Switches:
    """Batsim's ``CurrentSwitches`` and its switch counters; the ``_pstate_changes.csv``
    rows after the initial ones (time, machines, state)."""

    pending: dict[int, list[_Switch]] = field(default_factory=dict)  # by target state
    rows: list[tuple[float, str, int]] = field(default_factory=list)
    grouped: int = 0  # nb_grouped_switches
    machines: int = 0  # nb_machine_switches
    in_flight: int = 0  # machines switching (the simulation does not end before they are)

    def request(self, now: float, machines: ProcSet, target: int, kind: str) -> None:
        self.pending.setdefault(target, []).append(_Switch(machines, set(machines)))
        self.rows.append((now, str(machines), _TRANSITION_ROW.get(kind, -42)))
        self.grouped += 1
        self.machines += len(machines)

    def done(self, now: float, machine: int, target: int) -> ProcSet | None:
        """``mark_switch_as_done``: the request's machines when it was its last one."""
        switches = self.pending[target]
        for index, switch in enumerate(switches):
            if machine in switch.waiting:
                switch.waiting.discard(machine)
                if switch.waiting:
                    return None
                del switches[index]
                if not switches:
                    del self.pending[target]
                self.rows.append((now, str(switch.machines), target))
                return switch.machines
        raise AssertionError(f"machine {machine} was not switching to {target}")


class PowerStates:
    """The compute machines' power states: their kinds, their current state (SimGrid's
    ``get_pstate``: a virtual one during a switch) and the switches under way."""

    def __init__(self, platform) -> None:  # type: ignore[no-untyped-def]
        self.speeds = [h.pstate_speeds or (h.speed,) for h in platform.compute]
        self.hosts = [
            host_pstates(h.properties, speeds, f"{platform.path}: <host id={h.name!r}>")
            for h, speeds in zip(platform.compute, self.speeds, strict=True)
        ]
        self.current = [h.pstate for h in platform.compute]
        self.switches = Switches()

    def kind(self, machine: int, pstate: int) -> str:
        return self.hosts[machine].kinds[pstate]

    def check_request(self, machines: ProcSet, state: str, busy: list[list[str]]) -> int:
        """The target of a SET_RESOURCE_STATE, or why it cannot be followed (Batsim aborts,
        or logs an error and never reports the switch, or this model does not go there)."""
        try:
            target = int(state)
        except ValueError:
            raise ValueError(f"state {state!r} is not a power state number") from None
        for machine in machines:
            kinds = self.hosts[machine].kinds
            if not 0 <= target < len(kinds):
                raise ValueError(
                    f"machine {machine} has no power state {target} (it has {len(kinds)})"
                )
            now, new = kinds[self.current[machine]], kinds[target]
            if (now, new) not in (
                (COMPUTATION, COMPUTATION),
                (COMPUTATION, SLEEP),
                (SLEEP, COMPUTATION),
            ):
                current = self.current[machine]
                where = (
                    f"is switching (virtual power state {current})"
                    if now == TRANSITION
                    else f"is in {now} power state {current}"
                )
                raise ValueError(
                    f"machine {machine} {where} and power state {target} is a {new} one: Batsim only switches computation → computation or sleep, "
                    "sleep → computation (else it aborts, or logs an error and never reports "
                    "the switch)"
                )
            if busy[machine]:
                raise ValueError(
                    f"machine {machine} runs job {busy[machine][0]!r}: Batsim aborts switching "
                    "it to sleep, and a computing machine's speed changing under a job is not "
                    "modelled by timewarp sim"
                )
        return target

    def virtual(self, machine: int, target: int) -> int:
        """The virtual state a switch goes through: the target's switch-off state going to
        sleep, the current sleep state's switch-on state waking up."""
        host = self.hosts[machine]
        if host.kinds[target] == SLEEP:
            return host.sleep[target][0]
        return host.sleep[self.current[machine]][1]
