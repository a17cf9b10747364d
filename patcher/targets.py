"""The one table of what the patcher rewrites, and where each name goes.

Every entry maps a standard-library name, spelled as libcst's QualifiedNameProvider
spells it (``"time.sleep"``, ``"datetime.datetime.now"``), to a name in the timewarp
runtime (``timewarp.v<module>``). The runtime's drop-ins behave exactly like the standard
library when no broker is configured, so rewritten code still runs on a real cluster.

Invariants the rest of the patcher relies on:

- a target is either a module-level name (``time.sleep``: two dotted parts, importable with
  ``from time import sleep``) or a class attribute (``datetime.datetime.now``: three parts,
  reachable only through the class, which itself is never replaced);
- runtime names are importable from their runtime module under the name given here, and a
  runtime module never appears as a key (so patching patched code changes nothing).

Deliberately absent: ``time.strptime``, ``process_time``, ``thread_time``, ``mktime``,
``struct_time``, timezone constants; ``datetime.timedelta`` and the ``datetime``/``date``
classes (``isinstance``, subclassing and annotations must keep the real classes);
``queue.Empty``/``queue.Full``; ``asyncio.sleep``/``wait_for`` (they follow the virtual-time
loop that ``timewarp.vasyncio``'s entry points install).
"""

from __future__ import annotations

from dataclasses import dataclass

RUNTIME_PACKAGE = "timewarp"


@dataclass(frozen=True)
class Target:
    """One rewritten standard-library name and its runtime replacement."""

    stdlib: str  # "time.sleep", "datetime.datetime.now"
    runtime_module: str  # "timewarp.vtime"
    runtime_name: str  # "sleep", "datetime_now"

    @property
    def runtime(self) -> str:
        return f"{self.runtime_module}.{self.runtime_name}"

    @property
    def stdlib_module(self) -> str:
        return self.stdlib.split(".", 1)[0]

    @property
    def module_level_name(self) -> str | None:
        """The name ``from <module> import`` binds, or None for a class attribute."""
        parts = self.stdlib.split(".")
        return parts[1] if len(parts) == 2 else None


def _same_names(module: str, names: str) -> list[Target]:
    return [Target(f"{module}.{name}", f"timewarp.v{module}", name) for name in names.split()]


_TABLE: list[Target] = [
    *_same_names(
        "time",
        "time time_ns monotonic monotonic_ns perf_counter perf_counter_ns sleep"
        " localtime gmtime ctime asctime strftime",
    ),
    Target("datetime.datetime.now", "timewarp.vdatetime", "datetime_now"),
    Target("datetime.datetime.utcnow", "timewarp.vdatetime", "datetime_utcnow"),
    Target("datetime.datetime.today", "timewarp.vdatetime", "datetime_today"),
    Target("datetime.date.today", "timewarp.vdatetime", "date_today"),
    *_same_names(
        "threading",
        "Event Condition Timer Thread Semaphore BoundedSemaphore Lock RLock Barrier",
    ),
    *_same_names("queue", "Queue LifoQueue PriorityQueue SimpleQueue"),
    *_same_names("sched", "scheduler"),
    *_same_names("asyncio", "run new_event_loop Runner get_event_loop"),
]

#: stdlib qualified name -> Target
TARGETS: dict[str, Target] = {t.stdlib: t for t in _TABLE}

#: stdlib module -> {module-level name -> Target}; what ``from <module> import name`` rewrites.
MODULE_LEVEL: dict[str, dict[str, Target]] = {}
for _t in _TABLE:
    if _t.module_level_name is not None:
        MODULE_LEVEL.setdefault(_t.stdlib_module, {})[_t.module_level_name] = _t

#: stdlib module -> runtime module for module-level names (``time`` -> ``timewarp.vtime``).
RUNTIME_MODULE_FOR: dict[str, str] = {m: f"timewarp.v{m}" for m in MODULE_LEVEL}

#: stdlib module -> names a ``from <module> import *`` binds that lead to a target
#: (``datetime`` -> ``{"datetime", "date"}``; ``time`` -> its module-level targets).
STAR_HEADS: dict[str, frozenset[str]] = {}
for _t in _TABLE:
    STAR_HEADS.setdefault(_t.stdlib_module, frozenset())
    STAR_HEADS[_t.stdlib_module] |= {_t.stdlib.split(".")[1]}

#: the standard-library modules through which every target is reached
TARGET_MODULES: frozenset[str] = frozenset(STAR_HEADS)

RUNTIME_MODULES: tuple[str, ...] = tuple(sorted({t.runtime_module for t in _TABLE}))


def runtime_alias(runtime_module: str) -> str:
    """The module-level name under which rewritten references reach a runtime module.

    ``timewarp.vtime`` -> ``_timewarp_vtime``; the leading underscore keeps it out of
    ``from module import *`` and makes a clash with user names unlikely.
    """
    return "_" + runtime_module.replace(".", "_")
