"""The clock the facade is given: virtual time owned by the broker.

The facade never reads the wall clock for anything a client can observe. Timestamps are
``wall_epoch_ns() + now_ns()``; watch ``timeoutSeconds`` and bookmark intervals are
deadlines handed to ``call_at`` in virtual nanoseconds.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ns(self) -> int:
        """Virtual nanoseconds since simulation start."""
        ...

    def wall_epoch_ns(self) -> int:
        """Wall-clock time (ns since the Unix epoch) that virtual time 0 stands for."""
        ...

    def call_at(self, deadline_ns: int, fn: Callable[[], None]) -> Cancellable:
        """Run ``fn`` once virtual time reaches ``deadline_ns`` (in some broker thread).

        Called from facade request threads and from inside callbacks (a bookmark re-arms
        itself), so it must not deadlock when called while a callback runs. Callbacks
        take only the facade's short internal locks and never block."""
        ...


class _Timer:
    __slots__ = ("deadline_ns", "fn", "cancelled")

    def __init__(self, deadline_ns: int, fn: Callable[[], None]) -> None:
        self.deadline_ns = deadline_ns
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that moves only when told to: ``advance`` / ``advance_to``.

    Invariant: after ``advance_to(t)`` returns, every callback with deadline <= t that was
    not cancelled has run exactly once, in (deadline, registration order), in the calling
    thread, and ``now_ns() == t``. Callbacks registered for a time already reached run on
    the next advance (even ``advance(0)``), never synchronously inside ``call_at``.
    """

    def __init__(self, start_ns: int = 0, wall_epoch_ns: int = 1_700_000_000 * 10**9) -> None:
        self._now = start_ns
        self._epoch = wall_epoch_ns
        self._heap: list[tuple[int, int, _Timer]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        with self._lock:
            return self._now

    def wall_epoch_ns(self) -> int:
        return self._epoch

    def call_at(self, deadline_ns: int, fn: Callable[[], None]) -> Cancellable:
        timer = _Timer(deadline_ns, fn)
        with self._lock:
            heapq.heappush(self._heap, (deadline_ns, next(self._seq), timer))
        return timer

    def pending(self) -> list[int]:
        """Deadlines of the callbacks not yet run nor cancelled, sorted."""
        with self._lock:
            return sorted(d for d, _, t in self._heap if not t.cancelled)

    def advance(self, delta_ns: int) -> None:
        self.advance_to(self.now_ns() + delta_ns)

    def advance_to(self, target_ns: int) -> None:
        while True:
            with self._lock:
                if target_ns < self._now:
                    raise ValueError(f"time cannot go back: {target_ns} < {self._now}")
                if not self._heap or self._heap[0][0] > target_ns:
                    self._now = target_ns
                    return
                deadline, _, timer = heapq.heappop(self._heap)
                self._now = max(self._now, deadline)
            if not timer.cancelled:
                timer.fn()
