"""The scheduling queue: which pending pod to try next, and when to retry a failed one.

Follows kube-scheduler's three queues (pkg/scheduler/internal/queue):

- *active*: pods ready to be tried, popped in order of priority (higher first), then
  creation time, then namespace and name (digit runs compared as numbers, so ``job-9``
  comes before ``job-10``). The order is total, so the same pods always pop in the same
  order.
- *backoff*: pods that failed and must wait ``initial_backoff * 2**(attempts-1)`` seconds
  (capped at ``max_backoff``; kube-scheduler's podInitialBackoff=1 s, podMaxBackoff=10 s)
  after their last failure. They move to active exactly when the wait ends.
- *unschedulable*: pods that failed and wait for the cluster to change. ``move_all()``
  (a node was added or changed, a pod left a node) sends them to backoff — or straight
  to active when their backoff already ended. A pod left there longer than
  ``max_unschedulable`` seconds (kube-scheduler's 5 minutes) is moved anyway.

As in kube-scheduler, a cluster change that happens while a pod is being tried sends that
pod to backoff rather than unschedulable when the try fails, so the change is not missed.

The class is pure bookkeeping: every method takes ``now`` (seconds on any monotonic scale)
and nothing here reads a clock, sleeps or locks. Callers serialise access.
"""

from __future__ import annotations

import functools
import heapq
import re
from dataclasses import dataclass

from .model import PodSummary

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
IN_FLIGHT = "in-flight"

_DIGITS = re.compile(r"(\d+)")


@functools.lru_cache(maxsize=1 << 17)
def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """``"job-10"`` sorts after ``"job-9"``; ties between equal numbers (``"01"``/``"1"``)
    are broken by the text itself so the order stays total."""
    parts: list[tuple[int, int | str]] = []
    for i, part in enumerate(_DIGITS.split(text)):
        if i % 2:
            parts.append((0, int(part)))
            parts.append((1, part))
        elif part:
            parts.append((1, part))
    return tuple(parts)


def queue_order(pod: PodSummary) -> tuple:
    return (-pod.priority, pod.created, natural_key(pod.namespace), natural_key(pod.name))


@dataclass
class _Entry:
    pod: PodSummary
    where: str
    attempts: int = 0
    last_failure: float = 0.0
    version: int = 0
    popped_in_cycle: int = -1


class SchedulingQueue:
    def __init__(
        self,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_unschedulable: float = 300.0,
    ) -> None:
        if initial_backoff <= 0 or max_backoff < initial_backoff:
            raise ValueError("need 0 < initial_backoff <= max_backoff")
        if max_unschedulable <= 0:
            raise ValueError("max_unschedulable must be positive")
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable = max_unschedulable
        self._entries: dict[str, _Entry] = {}
        self._active: list[tuple] = []  # (order, version, key)
        self._backoff: list[tuple] = []  # (ready_at, order, version, key)
        self._unschedulable: list[tuple] = []  # (flush_at, order, version, key)
        self._version = 0
        self._cycle = 0
        self._move_request_cycle = -1

    # -- queries -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def where(self, key: str) -> str | None:
        entry = self._entries.get(key)
        return entry.where if entry else None

    def attempts(self, key: str) -> int:
        entry = self._entries.get(key)
        return entry.attempts if entry else 0

    def backoff_duration(self, attempts: int) -> float:
        """kube-scheduler's calculateBackoffDuration: doubles per attempt, capped."""
        duration = self.initial_backoff
        for _ in range(1, attempts):
            duration *= 2
            if duration >= self.max_backoff:
                return self.max_backoff
        return min(duration, self.max_backoff)

    def ready_at(self, key: str) -> float:
        entry = self._entries[key]
        if entry.attempts == 0:
            return float("-inf")
        return entry.last_failure + self.backoff_duration(entry.attempts)

    def next_wakeup(self, now: float) -> float | None:
        """Seconds from ``now`` until a timed move is due (0 if one is overdue), or None
        when only an event can make progress."""
        self._drop_stale()
        deadlines = []
        if self._backoff:
            deadlines.append(self._backoff[0][0])
        if self._unschedulable:
            deadlines.append(self._unschedulable[0][0])
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - now)

    # -- updates from watch events ---------------------------------------------------

    def add(self, pod: PodSummary, now: float) -> None:
        """A pending pod appeared or changed. A changed pod waiting as unschedulable is
        moved as on a cluster change (its new spec may fit); otherwise it keeps its place
        and backoff."""
        entry = self._entries.get(pod.key)
        if entry is None:
            entry = self._entries[pod.key] = _Entry(pod=pod, where=ACTIVE)
            self._push_active(entry)
            return
        changed = entry.pod != pod
        entry.pod = pod
        if entry.where == ACTIVE and changed:
            self._push_active(entry)
        elif entry.where == BACKOFF and changed:
            self._push_backoff(entry)
        elif entry.where == UNSCHEDULABLE and changed:
            self._move(entry, now)

    def remove(self, key: str) -> None:
        """The pod was deleted, bound, or is no longer ours."""
        self._entries.pop(key, None)

    def move_all(self, now: float) -> None:
        """The cluster changed in a way that may make waiting pods fit."""
        self._move_request_cycle = self._cycle
        # O(unschedulable pods), not O(every pending pod): each unschedulable pod has
        # exactly one valid item in the heap; after the moves, none is left valid
        waiting, self._unschedulable = self._unschedulable, []
        for item in waiting:
            if self._valid(item, UNSCHEDULABLE):
                self._move(self._entries[item[-1]], now)

    # -- the scheduling cycle ----------------------------------------------------------

    def pop(self, now: float) -> PodSummary | None:
        """The next pod to try, marked in flight, or None if none is ready at ``now``."""
        self._flush(now)
        while self._active:
            _, version, key = heapq.heappop(self._active)
            entry = self._entries.get(key)
            if entry is None or entry.where != ACTIVE or entry.version != version:
                continue
            self._cycle += 1
            entry.where = IN_FLIGHT
            entry.popped_in_cycle = self._cycle
            return entry.pod
        return None

    def done(self, key: str) -> None:
        """The pod was bound: forget it."""
        self._entries.pop(key, None)

    def failed(self, key: str, now: float, *, unschedulable: bool = True) -> None:
        """The try failed. An unschedulable pod waits for a cluster change (or for
        backoff, if the cluster changed during the try); an error (``unschedulable=False``,
        e.g. the binding call failed) always goes to backoff."""
        entry = self._entries.get(key)
        if entry is None or entry.where != IN_FLIGHT:
            return
        entry.attempts += 1
        entry.last_failure = now
        if not unschedulable or self._move_request_cycle >= entry.popped_in_cycle:
            self._to_backoff_or_active(entry, now)
        else:
            entry.where = UNSCHEDULABLE
            entry.version = self._next_version()
            heapq.heappush(
                self._unschedulable,
                (now + self.max_unschedulable, queue_order(entry.pod), entry.version, key),
            )

    # -- internals ------------------------------------------------------------------------

    def _next_version(self) -> int:
        self._version += 1
        return self._version

    def _push_active(self, entry: _Entry) -> None:
        entry.where = ACTIVE
        entry.version = self._next_version()
        heapq.heappush(self._active, (queue_order(entry.pod), entry.version, entry.pod.key))

    def _push_backoff(self, entry: _Entry) -> None:
        entry.where = BACKOFF
        entry.version = self._next_version()
        ready = self.ready_at(entry.pod.key)
        heapq.heappush(self._backoff, (ready, queue_order(entry.pod), entry.version, entry.pod.key))

    def _to_backoff_or_active(self, entry: _Entry, now: float) -> None:
        if self.ready_at(entry.pod.key) <= now:
            self._push_active(entry)
        else:
            self._push_backoff(entry)

    def _move(self, entry: _Entry, now: float) -> None:
        self._to_backoff_or_active(entry, now)

    def _valid(self, item: tuple, where: str) -> bool:
        entry = self._entries.get(item[-1])
        return entry is not None and entry.where == where and entry.version == item[-2]

    def _drop_stale(self) -> None:
        while self._backoff and not self._valid(self._backoff[0], BACKOFF):
            heapq.heappop(self._backoff)
        while self._unschedulable and not self._valid(self._unschedulable[0], UNSCHEDULABLE):
            heapq.heappop(self._unschedulable)

    def _flush(self, now: float) -> None:
        """Move pods whose backoff ended to active, and pods unschedulable for too long
        to backoff/active."""
        self._drop_stale()
        while self._backoff and self._backoff[0][0] <= now:
            item = heapq.heappop(self._backoff)
            if self._valid(item, BACKOFF):
                self._push_active(self._entries[item[-1]])
            self._drop_stale()
        while self._unschedulable and self._unschedulable[0][0] <= now:
            item = heapq.heappop(self._unschedulable)
            if self._valid(item, UNSCHEDULABLE):
                self._move(self._entries[item[-1]], now)
            self._drop_stale()
