"""The clock service's timer heap: broker-side callbacks and the processes' virtual waits,
in one total order.

Timers are ordered by (deadline, owner, key): the broker's own timers first, then each
process's in process-name order and, within a process, by the key its runtime gave (the
waiting thread's place in the thread tree and its wait counter) — never by arrival order,
so simultaneous wake-ups are released in the same order every run. Every method is called
with the clock service's lock held.

A *slack* timer (a server thread's poll timeout, ``timewarp/_core/servers.py``) never
decides when time moves: it is left out of the next deadline until time has reached it
for another reason, and then fires, once, in the same total order as the others (late:
at the instant time reached). Its runtime may *harden* it (another thread of the process
waits for a thread, perhaps that one): it is then an ordinary timer, due at its deadline.
Only when no ordinary timer is pending may a driver with nothing else to wait for (the
standalone autopilot) move time to the first slack deadline (:meth:`TimerQueue.first_slack`).
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
    slack: bool = field(compare=False, default=False)

    @property
    def deadline(self) -> int:
        return self.sort_key[0]

    def cancel(self) -> None:
        self.cancelled = True


class TimerQueue:
    """The pending timers, first due first; a process's by (name, id) to cancel them."""

    def __init__(self) -> None:
        self._heap: list[Timer] = []
        self._slack: list[Timer] = []  # slack timers (see the module docstring)
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

    def add_wait(
        self,
        proc: ProcessState,
        timer_id: int,
        deadline_ns: int,
        key: list[int],
        slack: bool = False,
    ) -> None:
        """A process's virtual wait (its runtime's ``timer`` message)."""
        sort_key = (deadline_ns, 1, proc.name, tuple(key), next(self._seq))
        timer = Timer(sort_key, proc, timer_id, slack=slack)
        self._by_id[(proc.name, timer_id)] = timer
        heapq.heappush(self._slack if slack else self._heap, timer)

    def harden(self, name: str, timer_id: int) -> None:
        """Slack timer ``timer_id`` of process ``name`` becomes an ordinary one, due at its
        deadline (its place in the total order unchanged)."""
        timer = self._by_id.get((name, timer_id))
        if timer is None or not timer.slack:
            return
        timer.cancel()  # its entry in the slack heap
        hard = Timer(timer.sort_key, timer.proc, timer_id)
        self._by_id[(name, timer_id)] = hard
        heapq.heappush(self._heap, hard)

    def cancel_wait(self, name: str, timer_id: int) -> None:
        timer = self._by_id.pop((name, timer_id), None)
        if timer is not None:
            timer.cancel()

    def cancel_all_of(self, name: str) -> None:
        """Process ``name`` is gone: none of its waits will fire."""
        for key in [k for k in self._by_id if k[0] == name]:
            self._by_id.pop(key).cancel()

    @staticmethod
    def _top(heap: list[Timer]) -> Timer | None:
        """``heap``'s first live timer (cancelled ones and those of gone processes dropped)."""
        while heap and (heap[0].cancelled or (heap[0].proc is not None and heap[0].proc.gone)):
            heapq.heappop(heap)
        return heap[0] if heap else None

    def first(self, now_ns: int) -> Timer | None:
        """The next timer to fire: the first ordinary one, or a slack one that time (at
        ``now_ns``) has reached, whichever comes first in the total order."""
        hard = self._top(self._heap)
        slack = self._top(self._slack)
        if slack is not None and slack.deadline <= now_ns and (hard is None or slack < hard):
            return slack
        return hard

    def first_slack(self) -> Timer | None:
        """The first slack timer, due or not (what time would go to if nothing else were
        pending)."""
        return self._top(self._slack)

    def _raw_next(self, now_ns: int) -> tuple[list[Timer], Timer] | None:
        """The head of the total order as it lies (a cancelled timer included): the
        ordinary heap's, or the slack heap's if due and earlier."""
        heap, slack = self._heap, self._slack
        if slack and slack[0].deadline <= now_ns and (not heap or slack[0] < heap[0]):
            return slack, slack[0]
        return (heap, heap[0]) if heap else None

    def pop_owner(self, now_ns: int) -> tuple[Timer, list[int]]:
        """Pop the first timer (:meth:`first`, called just before) and, if a process owns
        it, that process's other timers due at ``now_ns`` that follow it in the order:
        they go out in one ``fire``. Returns the first and the ids fired."""
        first = self.first(now_ns)
        assert first is not None
        heapq.heappop(self._slack if first.slack else self._heap)
        if first.proc is None:
            return first, []
        proc, ids = first.proc, [first.timer_id]
        self._by_id.pop((proc.name, first.timer_id), None)
        while (head := self._raw_next(now_ns)) is not None:
            heap, nxt = head
            if nxt.proc is not proc or nxt.deadline > now_ns:
                break
            heapq.heappop(heap)
            if not nxt.cancelled:
                ids.append(nxt.timer_id)
                self._by_id.pop((proc.name, nxt.timer_id), None)
        return first, ids
