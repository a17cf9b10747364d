"""Hosts' energy as SimGrid 3.32's host-energy plugin counts it, for Batsim's ``-E``.

Why: with ``-E``, Batsim reports each job's ``consumed_energy`` (what its machines used
between its start and its end), writes ``_consumed_energy.csv`` (the compute machines'
total energy at every job start and end) and ``_pstate_changes.csv``, and answers QUERY
``consumed_energy``. The plugin reads each host's ``wattage_per_state`` (per power
state, ``idle:max`` or ``idle:epsilon:max``) and ``wattage_off``; a host draws its idle
power when nothing computes on it, else ``epsilon + load × (max − epsilon)``, the load
being the flops/s computed on it over its speed × cores (at most 1). A delay job sleeps:
its machines draw idle power. Energy is power × time, summed piece by piece.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy

from simulator.network import PlatformError


@dataclass(frozen=True)
class PowerRange:
    idle: float
    epsilon: float
    max: float

    @property
    def slope(self) -> float:
        return self.max - self.epsilon


def parse_wattage(text: str, where: str) -> list[PowerRange]:
    """``"30.0:100.0, 9.75:9.75"`` → one range per power state."""
    ranges = []
    for part in text.split(","):
        try:
            values = [float(v) for v in part.strip().split(":")]
        except ValueError:
            raise PlatformError(f"{where}: wattage_per_state {text!r} is not numbers") from None
        if len(values) == 2:
            ranges.append(PowerRange(values[0], values[0], values[1]))
        elif len(values) == 3:
            ranges.append(PowerRange(values[0], values[1], values[2]))
        else:
            raise PlatformError(
                f"{where}: wattage_per_state {text!r}: each state is 'idle:max' or "
                "'idle:epsilon:max'"
            )
    return ranges


class EnergyMeter:
    """The compute machines' energy over time (resource ids as Batsim's)."""

    def __init__(
        self,
        names: list[str],
        ranges: list[list[PowerRange]],
        pstates: list[int],
        speeds: list[tuple[float, ...]],
        cores: list[int],
    ) -> None:
        self.names = names
        self.ranges = ranges
        self.pstate = list(pstates)
        # the plugin's own idea of each host's power state: 0 until its first update
        # (SimGrid's HostEnergy starts at 0 and reads the host's state after each update)
        self.counted = [0] * len(names)
        self.speeds, self.cores = speeds, cores  # per power state; per host
        # speed × cores at the current power state (SimGrid's load is over the speed now)
        self.capacity = [s[p] * c for s, p, c in zip(speeds, pstates, cores, strict=True)]
        self.energy = [0.0] * len(names)
        self.last = [0.0] * len(names)
        self.load = [0.0] * len(names)  # flops/s computed now

    def power(self, host: int) -> float:
        power_range = self.ranges[host][self.counted[host]]
        load = min(1.0, self.load[host] / self.capacity[host]) if self.capacity[host] > 0 else 1.0
        if load > 0:
            return power_range.epsilon + load * power_range.slope
        return power_range.idle

    def update(self, host: int, now: float) -> None:
        """HostEnergy::update(): the energy since the last update, then the power state
        read again."""
        if self.last[host] < now:
            self.energy[host] = self.energy[host] + self.power(host) * (now - self.last[host])
            self.last[host] = now
        self.counted[host] = self.pstate[host]

    def set_pstate(self, host: int, pstate: int, now: float) -> None:
        """``Host::set_pstate``: the new speed, then the plugin's update (on_speed_change):
        the time since the last update at the power it counted, the load over the new
        speed."""
        self.pstate[host] = pstate
        self.capacity[host] = self.speeds[host][pstate] * self.cores[host]
        self.update(host, now)

    def add_load(self, host: int, now: float, flops_per_s: float) -> None:
        self.update(host, now)
        self.load[host] += flops_per_s
        if abs(self.load[host]) < 1e-6:
            self.load[host] = 0.0

    def on(self, hosts: tuple[int, ...], now: float) -> Any:
        """What these machines consumed up to now (joules, summed in long double as
        Batsim sums them)."""
        total = numpy.longdouble(0)
        for host in hosts:
            if self.last[host] < now:  # get_consumed_energy updates only if time passed
                self.update(host, now)
            total += numpy.longdouble(self.energy[host])
        return total

    def total(self, now: float) -> float:
        return float(self.exact_total(now))

    def exact_total(self, now: float) -> Any:
        """The machines' energy summed as Batsim sums it: in long double (x87's 80 bits,
        numpy's ``longdouble`` on x86-64), machine after machine."""
        return self.on(tuple(range(len(self.names))), now)

    def wattmin(self) -> float:
        """Batsim's wattmin: each machine's epsilon (power computing at no load) now."""
        return sum(self.ranges[h][self.pstate[h]].epsilon for h in range(len(self.names)))


def energy_meter(platform) -> EnergyMeter:  # type: ignore[no-untyped-def]
    """The meter of a platform's compute hosts; each needs ``wattage_per_state``."""
    ranges, pstates, speeds, cores = [], [], [], []
    for host in platform.compute:
        where = f"{platform.path}: <host id={host.name!r}>"
        text = host.properties.get("wattage_per_state")
        if text is None:
            raise PlatformError(
                f"{where}: no wattage_per_state property: -E/--energy needs the power of "
                "every compute host (as SimGrid's energy plugin does)"
            )
        found = parse_wattage(text, where)
        if len(found) < len(host.pstate_speeds):
            raise PlatformError(
                f"{where}: wattage_per_state has {len(found)} states, the host "
                f"{len(host.pstate_speeds)} speeds"
            )
        ranges.append(found)
        pstates.append(host.pstate)
        speeds.append(host.pstate_speeds or (host.speed,))
        cores.append(host.cores)
    return EnergyMeter([h.name for h in platform.compute], ranges, pstates, speeds, cores)
