"""A reference decision process: strict FCFS with cpu accounting.

This is the decision process documented with the real-Batsim reference outputs
(``shared/data/batsim-reference/README.md``), used by the conformance tests and the
benchmark. Capacity of a compute resource = its ``core`` property (default 1); a job's
demand = its profile's ``cpu`` (``"1"``, ``0.188``, ``"4000m"``; default 1). Jobs are taken
in submission order; the head job starts on the ``res`` lowest-id resources with
``used + demand <= capacity``; if it does not fit, everybody waits; a job that can never
fit is rejected. Replies carry ``now`` equal to the request's ``now``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import zmq
from procset import ProcSet

from simulator import protocol as p


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


class Fcfs:
    """Call with each message from Batsim; returns the reply."""

    def __init__(self) -> None:
        self.capacity: list[float] = []
        self.used: list[float] = []
        self.queue: deque[str] = deque()
        self.demand: dict[str, float] = {}
        self.res: dict[str, int] = {}
        self.running: dict[str, ProcSet] = {}
        self.profiles: dict[str, dict[str, Any]] = {}
        self.messages = 0

    def __call__(self, message: p.Message) -> p.Message:
        self.messages += 1
        now = message.now
        out: list[p.Event] = []
        for event in message.events:
            data = event.data
            if isinstance(data, p.SimulationBegins):
                self.capacity = [
                    float(r["properties"].get("core", 1)) for r in data.compute_resources
                ]
                self.used = [0.0] * len(self.capacity)
                self.profiles = data.profiles
            elif isinstance(data, p.JobSubmitted):
                workload = data.job_id.split("!", 1)[0]
                profile = data.profile or self.profiles[workload][data.job["profile"]]
                self.demand[data.job_id] = cpu_quantity(profile.get("cpu"))
                self.res[data.job_id] = int(data.job["res"])
                self.queue.append(data.job_id)
            elif isinstance(data, p.JobCompleted):
                alloc = self.running.pop(data.job_id, None)
                if alloc is not None:
                    for rid in alloc:
                        self.used[rid] -= self.demand[data.job_id]
        while self.queue:
            head = self.queue[0]
            demand, res = self.demand[head], self.res[head]
            fitting_ever = [i for i, cap in enumerate(self.capacity) if demand <= cap + 1e-9]
            if len(fitting_ever) < res:
                self.queue.popleft()
                out.append(p.Event(now, p.RejectJob(head)))
                continue
            free = [i for i, cap in enumerate(self.capacity) if self.used[i] + demand <= cap + 1e-9]
            if len(free) < res:
                break
            chosen = free[:res]
            self.queue.popleft()
            for rid in chosen:
                self.used[rid] += demand
            alloc = ProcSet(*chosen)
            self.running[head] = alloc
            out.append(p.Event(now, p.ExecuteJob(head, alloc)))
        return p.Message(now, out)


def serve(endpoint: str, decide=None) -> int:
    """Bind a REP socket at ``endpoint`` and answer until SIMULATION_ENDS; returns the
    number of messages handled."""
    decide = decide or Fcfs()
    context = zmq.Context()
    socket = context.socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 0)
    count = 0
    try:
        socket.bind(endpoint)
        while True:
            message = p.decode(socket.recv(), "batsim")
            reply = decide(message)
            socket.send_string(p.encode(reply))
            count += 1
            if any(isinstance(e.data, p.SimulationEnds) for e in message.events):
                return count
    finally:
        socket.close(linger=0)
        context.term()


if __name__ == "__main__":  # python -m simulator.fcfs tcp://*:28000
    import sys

    serve(sys.argv[1] if len(sys.argv) > 1 else "tcp://*:28000")
