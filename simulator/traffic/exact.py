"""The per-request model: processor sharing on each replica, round-robin routing.

Invariants (``tests/test_traffic_properties.py`` checks them):

- every arrival ends exactly once: completed, timed out (still in flight ``timeout``
  seconds after it arrived), dropped (no Ready replica when it arrived) or lost with its
  replica (the pod went away with the request in flight);
- a replica with ``n`` requests in flight and a CPU limit of ``L`` cores serves each at
  ``min(1, L/n)`` cores (a request is single-threaded; the limit is shared equally):
  the CPU it consumes is ``min(n, L)`` per second, never more than its limit, and the
  work it does equals the cost of what completed plus the part done of what did not;
- arrivals go round-robin over the Ready replicas in name order, continuing after the
  last one served when the set changes; a replica that stops being Ready gets nothing
  new but finishes what it has.

Cost: O(log n) per request. All requests of a replica progress at the same rate, so a
request is done when the replica's attained-service counter ``v`` reaches its tag
``v_at_arrival + cost`` (the classic virtual-time formulation of PS): a heap of tags
gives the next completion, and since every request has the same timeout the deadlines
are a FIFO. A replica is only brought up to date when it gets a request or a tick closes.
"""

from __future__ import annotations

import heapq
from collections import deque


class Replica:
    """One pod's processor-sharing server."""

    __slots__ = (
        "limit",
        "t",
        "n",
        "v",
        "heap",
        "fifo",
        "timed_out",
        "done",
        "cpu",
        "area",
        "work_done",
        "completed",
        "expired",
        "accepted",
    )

    def __init__(self, limit_cores: float, t: float) -> None:
        self.limit = limit_cores
        self.t = t
        self.n = 0
        self.v = 0.0
        self.heap: list[tuple[float, int, float, float]] = []  # (tag, seq, arrival, cost)
        self.fifo: deque[tuple[float, float, int]] = deque()  # (deadline, tag, seq)
        self.timed_out: set[int] = set()  # in the heap still, no longer in flight
        self.done: set[int] = set()  # in the FIFO still, no longer in flight
        self.cpu = 0.0  # CPU-seconds consumed since it started
        self.area = 0.0  # ∫ requests in flight dt
        self.work_done = 0.0  # CPU-seconds of completed requests' costs
        self.completed = 0
        self.expired = 0
        self.accepted = 0  # requests routed here, ever

    def advance(self, until: float, latencies: list[float]) -> None:
        """Serve until ``until``; completions append their latency."""
        t, n, v = self.t, self.n, self.v
        heap, fifo, limit = self.heap, self.fifo, self.limit
        while n:
            r = 1.0 if n <= limit else limit / n
            while heap[0][1] in self.timed_out:
                self.timed_out.discard(heapq.heappop(heap)[1])
            tag = heap[0][0]
            tc = t + (tag - v) / r
            done = self.done
            while fifo[0][2] in done:
                done.discard(fifo.popleft()[2])
            td = fifo[0][0]
            te = tc if tc <= td else td
            if te > until:
                break
            dt = te - t
            busy = n if n <= limit else limit
            self.cpu += busy * dt
            self.area += n * dt
            t = te
            if tc <= td:
                _tag, seq, arrival, cost = heapq.heappop(heap)
                v = tag
                self.done.add(seq)
                latencies.append(t - arrival)
                self.work_done += cost
                self.completed += 1
            else:
                v += r * dt
                _deadline, _tag, seq = fifo.popleft()
                self.timed_out.add(seq)
                self.expired += 1
            n -= 1
        if until > t:
            dt = until - t
            if n:
                r = 1.0 if n <= limit else limit / n
                v += r * dt
                self.cpu += (n if n <= limit else limit) * dt
                self.area += n * dt
            t = until
        self.t, self.n, self.v = t, n, v
        if not n:
            self.v = 0.0  # empty: restart the counter (keeps the floats small)
            heap.clear()
            fifo.clear()
            self.timed_out.clear()
            self.done.clear()

    def accept(self, arrival: float, cost: float, seq: int, timeout: float) -> None:
        tag = self.v + cost
        heapq.heappush(self.heap, (tag, seq, arrival, cost))
        self.fifo.append((arrival + timeout, tag, seq))
        self.n += 1
        self.accepted += 1

    def in_flight_work(self) -> float:
        """CPU-seconds already spent on the requests still in flight."""
        return sum(
            self.v - (tag - cost) for tag, seq, _a, cost in self.heap if seq not in self.timed_out
        )

    def drop_all(self) -> int:
        lost = self.n
        self.n = 0
        self.heap.clear()
        self.fifo.clear()
        self.timed_out.clear()
        self.done.clear()
        self.v = 0.0
        return lost
