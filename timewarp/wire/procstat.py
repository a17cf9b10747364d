"""A process's CPU time from ``/proc/PID/stat`` (Linux), for the broker's stall guard
(is a busy process computing?) and the commands' figures (each scheduler's CPU). In
``timewarp.wire`` (what every layer may import) because both read it."""

from __future__ import annotations

import os

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_times(pid: int, children: bool = False) -> tuple[float, float] | None:
    """(user, system) CPU seconds of process ``pid`` (all its threads; with
    ``children``, its waited-for children's too), or None where unknown (no /proc, the
    process gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # (the command name is in parentheses and may hold spaces: split after it) state(0)
    # ... utime(11) stime(12) cutime(13) cstime(14), in clock ticks
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        user, system = int(fields[11]), int(fields[12])
        if children:
            user, system = user + int(fields[13]), system + int(fields[14])
    except (IndexError, ValueError):
        return None
    return user / _TICK, system / _TICK
