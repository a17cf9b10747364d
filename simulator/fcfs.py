"""A reference decision process: strict FCFS with cpu accounting.

This is the decision process documented with the real-Batsim reference outputs
(``shared/data/batsim-reference/README.md``), used by the conformance tests and the
benchmarks. Capacity of a compute resource = its ``core`` property (default 1); a job's
demand = its profile's ``cpu`` (``"1"``, ``0.188``, ``"4000m"``; default 1). Jobs are taken
in submission order; the head job starts on the ``res`` lowest-id resources with
``used + demand <= capacity``; if it does not fit, everybody waits; a job that can never
fit is rejected. Replies carry ``now`` equal to the request's ``now``.

The lowest-id resource with room is found in a segment tree of the resources' free
capacity (O(log n) per job, not a scan of the platform), and :func:`serve` works on the
JSON itself (Batsim's messages are trusted here; the simulator validates the replies):
what a decision process costs should not hide what a simulator costs.
"""

from __future__ import annotations

import bisect
import json
from collections import deque
from typing import Any

import zmq
from procset import ProcSet

from simulator import protocol as p

_SLACK = 1e-9  # the tolerance of the fit rule: used + demand <= capacity + 1e-9


def cpu_quantity(value: Any) -> float:
    """Kubernetes cpu quantity → cores: ``"1"`` → 1, ``"4000m"`` → 4, ``0.188`` → 0.188."""
    if value is None:
        return 1.0
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    if text.endswith("m"):
        return float(text[:-1]) / 1000.0
    return float(text)


_FLOPS_PROFILES = ("parallel", "parallel_homogeneous", "parallel_homogeneous_total")


def _profile_demand(profile: dict[str, Any]) -> float:
    """What a job asks of each of its resources: its profile's ``cpu`` in cores
    (Batkube's delay profiles); a Batsim parallel task's ``cpu`` is flops, not cores:
    one core."""
    if profile.get("type") in _FLOPS_PROFILES:
        return 1.0
    return cpu_quantity(profile.get("cpu"))


class _FreeTree:
    """Free capacity per resource, a max segment tree: the lowest-id resource where a
    demand fits in O(log n)."""

    def __init__(self, capacity: list[float]) -> None:
        self.capacity = capacity
        self.used = [0.0] * len(capacity)
        size = 1
        while size < max(1, len(capacity)):
            size *= 2
        self.size = size
        self.tree = [float("-inf")] * (2 * size)
        for i, cap in enumerate(capacity):
            self.tree[size + i] = cap
        for node in range(size - 1, 0, -1):
            self.tree[node] = max(self.tree[2 * node], self.tree[2 * node + 1])

    def fits(self, rid: int, demand: float) -> bool:
        return self.used[rid] + demand <= self.capacity[rid] + _SLACK

    def first_fit(self, demand: float, start: int = 0) -> int:
        """The lowest resource id >= ``start`` where ``demand`` fits, or -1."""
        tree, size = self.tree, self.size
        # free >= demand - slack, loosened a hair: the leaf check is the exact rule
        need = demand - _SLACK - 1e-12
        if start == 0:  # the common case: straight down to the leftmost leaf with room
            if tree[1] < need:
                return -1
            node = 1
            while node < size:
                node *= 2
                if tree[node] < need:
                    node += 1
            rid = node - size
            if rid < len(self.capacity) and self.fits(rid, demand):
                return rid
            # (the loosened bound let a leaf through that the exact rule refuses: search)
        stack = [(1, 0, size)]
        while stack:
            node, lo, hi = stack.pop()
            if hi <= start or tree[node] < need:
                continue
            if hi - lo == 1:
                if lo < len(self.capacity) and self.fits(lo, demand):
                    return lo
                continue
            mid = (lo + hi) // 2
            stack.append((2 * node + 1, mid, hi))
            stack.append((2 * node, lo, mid))
        return -1

    def add(self, rid: int, amount: float) -> None:
        self.used[rid] += amount
        node = self.size + rid
        self.tree[node] = self.capacity[rid] - self.used[rid]
        node //= 2
        tree = self.tree
        while node:
            left, right = tree[2 * node], tree[2 * node + 1]
            tree[node] = left if left >= right else right
            node //= 2


class Fcfs:
    """Call with each message from Batsim (a :class:`protocol.Message`); returns the reply.
    :meth:`decide` does the same on the JSON objects."""

    def __init__(self) -> None:
        self.free: _FreeTree | None = None
        self.sorted_capacity: list[float] = []
        self.queue: deque[str] = deque()
        self.demand: dict[str, float] = {}
        self.res: dict[str, int] = {}
        self.running: dict[str, list[int]] = {}
        self.profiles: dict[str, dict[str, Any]] = {}
        self.messages = 0
        self._demand_of: dict[tuple[str, str], float] = {}
        self._able: dict[float, int] = {}  # demand -> how many resources could ever fit it

    def __call__(self, message: p.Message) -> p.Message:
        raw = json.loads(p.encode(message))
        reply = self.decide(raw)
        return p.from_json(reply, "decision")

    def decide(self, message: dict[str, Any]) -> dict[str, Any]:
        self.messages += 1
        now = message["now"]
        for event in message["events"]:
            kind, data = event["type"], event.get("data")
            if kind == "JOB_SUBMITTED":
                job_id = data["job_id"]
                self.demand[job_id] = self._demand(job_id, data)
                self.res[job_id] = int(data["job"]["res"])
                self.queue.append(job_id)
            elif kind == "JOB_COMPLETED":
                hosts = self.running.pop(data["job_id"], None)
                if hosts is not None:
                    demand = self.demand.pop(data["job_id"])
                    for rid in hosts:
                        self.free.add(rid, -demand)  # type: ignore[union-attr]
            elif kind == "SIMULATION_BEGINS":
                capacity = [
                    float(r["properties"].get("core", 1)) for r in data["compute_resources"]
                ]
                self.free = _FreeTree(capacity)
                self.sorted_capacity = sorted(capacity)
                self._able.clear()
                self.profiles = data["profiles"]
        return {"now": now, "events": self._schedule(now)}

    def _demand(self, job_id: str, data: dict[str, Any]) -> float:
        profile = data.get("profile")
        if profile is not None:
            return _profile_demand(profile)
        key = (job_id.split("!", 1)[0], data["job"]["profile"])
        demand = self._demand_of.get(key)
        if demand is None:
            demand = self._demand_of[key] = _profile_demand(self.profiles[key[0]][key[1]])
        return demand

    def _schedule(self, now: float) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        free = self.free
        while self.queue:
            head = self.queue[0]
            demand, res = self.demand[head], self.res[head]
            able = self._able.get(demand)
            if able is None:  # resources where it could ever fit: capacity + slack >= demand
                able = self._able[demand] = len(self.sorted_capacity) - bisect.bisect_left(
                    self.sorted_capacity, True, key=lambda cap: demand <= cap + _SLACK
                )
            if able < res:
                self.queue.popleft()
                del self.demand[head], self.res[head]
                out.append({"timestamp": now, "type": "REJECT_JOB", "data": {"job_id": head}})
                continue
            assert free is not None
            chosen: list[int] = []
            rid = -1
            while len(chosen) < res:
                rid = free.first_fit(demand, rid + 1)
                if rid < 0:
                    break
                chosen.append(rid)
            if len(chosen) < res:
                break
            self.queue.popleft()
            del self.res[head]  # (what ended is forgotten: memory stays flat)
            for rid in chosen:
                free.add(rid, demand)
            self.running[head] = chosen
            alloc = str(chosen[0]) if res == 1 else str(ProcSet(*chosen))
            out.append(
                {"timestamp": now, "type": "EXECUTE_JOB", "data": {"job_id": head, "alloc": alloc}}
            )
        return out


def serve(endpoint: str, decide=None) -> int:
    """Bind a REP socket at ``endpoint`` and answer until SIMULATION_ENDS; returns the
    number of messages handled. ``decide``: a function of a :class:`protocol.Message`
    (default: :class:`Fcfs`, on the JSON directly)."""
    fcfs = Fcfs() if decide is None else None
    context = zmq.Context()
    socket = context.socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 0)
    count = 0
    try:
        socket.bind(endpoint)
        while True:
            raw = socket.recv()
            if fcfs is not None:
                message = json.loads(raw.decode())
                socket.send(p.compact_json(fcfs.decide(message)).encode())
                ends = b"SIMULATION_ENDS" in raw and any(
                    e["type"] == "SIMULATION_ENDS" for e in message["events"]
                )
            else:
                decoded = p.decode(raw, "batsim")
                socket.send_string(p.encode(decide(decoded)))
                ends = any(isinstance(e.data, p.SimulationEnds) for e in decoded.events)
            count += 1
            if ends:
                return count
    finally:
        socket.close(linger=0)
        context.term()


if __name__ == "__main__":  # python -m simulator.fcfs tcp://*:28000
    import sys

    serve(sys.argv[1] if len(sys.argv) > 1 else "tcp://*:28000")
