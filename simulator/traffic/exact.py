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

import bisect
import heapq
from collections import deque
from collections.abc import Mapping, Sequence

import numpy as np

from simulator.traffic.arrivals import ArrivalStream
from simulator.traffic.serving import ReplicaState, Tally, TrafficConfig


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


class ExactServing:
    """Every request served (the :class:`~simulator.traffic.serving.Serving` protocol):
    one :class:`Replica` per pod, arrivals round-robin over the Ready ones in name order,
    going on after the last one served when the set changes."""

    splits_every_advance = True

    def __init__(self, config: TrafficConfig, tally: Tally) -> None:
        self.config = config
        self.tally = tally
        seeds = np.random.SeedSequence([config.seed & 0xFFFFFFFF, config.seed >> 32 & 0xFFFFFFFF])
        arrival_seed, cost_seed = seeds.spawn(2)
        self._arrivals = ArrivalStream(
            config.pattern, config.process, np.random.Generator(np.random.PCG64(arrival_seed))
        )
        self._cost_rng = np.random.Generator(np.random.PCG64(cost_seed))
        self.replicas: dict[str, Replica] = {}
        self._latencies: list[float] = []  # of the requests completed in the current tick
        self._last_served: str | None = None
        self._seq = 0

    def add(self, name: str, state: ReplicaState, t: float) -> None:
        self.replicas[name] = Replica(state.limit_cores, t)

    def remove(self, name: str, t: float) -> None:
        replica = self.replicas.pop(name)
        replica.advance(t, self._latencies)
        self._harvest(replica)
        counters, window = self.tally.pods[name], self.tally.window
        window.cpu += replica.cpu - counters.cpu
        window.area += replica.area - counters.area
        self.tally.lost(replica.drop_all())

    def resize(self, name: str, state: ReplicaState, t: float) -> None:
        replica = self.replicas[name]
        replica.advance(t, self._latencies)
        self._harvest(replica)
        replica.limit = state.limit_cores

    def _harvest(self, replica: Replica) -> None:
        """Move a replica's completion/timeout counts into the tally."""
        if replica.completed:
            self.tally.completed(replica.completed)
            replica.completed = 0
        if replica.expired:
            self.tally.timed_out(replica.expired)
            replica.expired = 0
        if replica.work_done:
            self.tally.totals.work_completed += replica.work_done
            replica.work_done = 0.0

    def serve(
        self, t0: float, t1: float, ready: Sequence[str], states: Mapping[str, ReplicaState]
    ) -> None:
        times = self._arrivals.take(t1)
        if not times.size:
            return
        costs = self.config.cost.sample(self._cost_rng, times.size)
        self.tally.arrived(times.size, float(costs.sum()))
        if not ready:
            self.tally.dropped(times.size)
            return
        replicas, timeout = self.replicas, self.config.timeout
        latencies = self._latencies
        count = len(ready)
        last = self._last_served
        k = 0 if last is None else bisect.bisect_right(ready, last) % count
        seq = self._seq
        targets = [replicas[name] for name in ready]
        per = [0] * count
        for arrival, cost in zip(times.tolist(), costs.tolist(), strict=True):
            if k >= count:
                k = 0
            replica = targets[k]
            replica.advance(arrival, latencies)
            replica.accept(arrival, cost, seq, timeout)
            seq += 1
            per[k] += 1
            k += 1
        self._seq = seq
        self._last_served = ready[(k - 1) % count]
        pods = self.tally.pods
        for name, n in zip(ready, per, strict=True):
            pods[name].arrivals += n
        for replica in targets:
            self._harvest(replica)

    def usage(self, name: str, t: float) -> tuple[float, float]:
        replica = self.replicas[name]
        replica.advance(t, self._latencies)
        self._harvest(replica)
        return replica.cpu, replica.area

    def take_latency_quantiles(self) -> tuple[float | None, float | None, float | None]:
        latencies, self._latencies = self._latencies, []
        if not latencies:
            return None, None, None
        p50, p95, p99 = (float(x) for x in np.percentile(latencies, [50, 95, 99]))
        return p50, p95, p99

    def in_flight(self) -> int:
        return sum(r.n for r in self.replicas.values())
