"""The clock service's timer heap: broker-side callbacks and the processes' virtual waits,
in one total order.

Timers are ordered by (deadline, owner, key): the broker's own timers first, then each
process's in process-name order and, within a process, by the key its runtime gave (the
waiting thread's place in the thread tree and its wait counter) — never by arrival order,
so simultaneous wake-ups are released in the same order every run. Every method is called
with the clock service's lock held.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count

from broker.clock.registry import ProcessState


@dataclass(order=True)
class Timer:
    """One pending timer: a broker-side callback (``proc`` None) or a process's wait."""

    sort_key: tuple
    proc: ProcessState | None = field(compare=False)
    timer_id: int = field(compare=False)
    fn: Callable[[], None] | None = field(compare=False, default=None)
    cancelled: bool = field(compare=False, default=False)

    @property
    def deadline(self) -> int:
        return self.sort_key[0]

    def cancel(self) -> None:
        self.cancelled = True


class TimerQueue:
    """The pending timers, first due first; a process's by (name, id) to cancel them."""

    def __init__(self) -> None:
        self._heap: list[Timer] = []
        self._by_id: dict[tuple[str, int], Timer] = {}
        self._seq = count()  # one sequence for both kinds: the last tie-breaker

    def add_callback(
        self, deadline_ns: int, fn: Callable[[], None], key: tuple[str, int] | None
    ) -> Timer:
        """A broker-side timer; ``key`` (a process name, its own sequence number) orders
        those due at one instant, otherwise the order they were set in does."""
        seq = next(self._seq)
        name, n = key if key is not None else ("", 0)
        timer = Timer((deadline_ns, 0, name, (n,), seq), None, seq, fn)
        heapq.heappush(self._heap, timer)
        return timer

    def add_wait(self, proc: ProcessState, timer_id: int, deadline_ns: int, key: list[int]) -> None:
        """A process's virtual wait (its runtime's ``timer`` message)."""
        timer = Timer((deadline_ns, 1, proc.name, tuple(key), next(self._seq)), proc, timer_id)
        self._by_id[(proc.name, timer_id)] = timer
        heapq.heappush(self._heap, timer)

    def cancel_wait(self, name: str, timer_id: int) -> None:
        timer = self._by_id.pop((name, timer_id), None)
        if timer is not None:
            timer.cancel()

    def cancel_all_of(self, name: str) -> None:
        """Process ``name`` is gone: none of its waits will fire."""
        for key in [k for k in self._by_id if k[0] == name]:
            self._by_id.pop(key).cancel()

    def first(self) -> Timer | None:
        """The next timer to fire (cancelled ones and those of gone processes dropped)."""
        heap = self._heap
        while heap and (heap[0].cancelled or (heap[0].proc is not None and heap[0].proc.gone)):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def pop_owner(self, now_ns: int) -> tuple[Timer, list[int]]:
        """Pop the first timer and, if a process owns it, that process's other timers due
        at ``now_ns``: they go out in one ``fire``. Returns the first and the ids fired."""
        heap = self._heap
        first = heapq.heappop(heap)
        if first.proc is None:
            return first, []
        proc, ids = first.proc, [first.timer_id]
        self._by_id.pop((proc.name, first.timer_id), None)
        while heap and heap[0].proc is proc and heap[0].deadline <= now_ns:
            nxt = heapq.heappop(heap)
            if not nxt.cancelled:
                ids.append(nxt.timer_id)
                self._by_id.pop((proc.name, nxt.timer_id), None)
        return first, ids
