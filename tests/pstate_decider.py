"""A decision process that switches machines' power states (SET_RESOURCE_STATE under
``-E``), for the tests that compare the embedded simulator with real Batsim 4.2.1.

FCFS on the machines in a computation power state. At the start it sends machines 2-3 to
sleep (power state 1) and machine 1 to the slower computation state 4 (2 and 3: the transitions of sleep state 1); when three jobs
wait it wakes the sleeping machines (state 0); a machine of 2-3 that a completion frees
while nothing waits goes back to sleep. Every decision is a function of the messages.

Run: ``python tests/pstate_decider.py ENDPOINT`` (binds a REP socket there).
"""

from __future__ import annotations

import json
import sys

import zmq
from procset import ProcSet


class PstateFcfs:
    def __init__(self) -> None:
        self.usable: set[int] = set()
        self.busy: dict[str, list[int]] = {}
        self.sleeping: set[int] = set()
        self.queue: list[tuple[str, int]] = []
        self.nb = 0

    def __call__(self, raw: str) -> str:
        message = json.loads(raw)
        now = message["now"]
        out: list[dict] = []

        def switch(machines: list[int], state: int) -> None:
            out.append({"timestamp": now, "type": "SET_RESOURCE_STATE",
                        "data": {"resources": str(ProcSet(*machines)), "state": str(state)}})  # fmt: skip

        for event in message["events"]:
            kind, data = event["type"], event["data"]
            if kind == "SIMULATION_BEGINS":
                self.nb = data["nb_compute_resources"]
                self.usable = {0} | set(range(4, self.nb))
                switch([2, 3], 1)
                switch([1], 4)
            elif kind == "JOB_SUBMITTED":
                self.queue.append((data["job_id"], data["job"]["res"]))
            elif kind == "JOB_COMPLETED":
                freed = self.busy.pop(data["job_id"])
                self.usable.update(freed)
                back = [m for m in freed if m in (2, 3)]
                if back and not self.queue:
                    self.usable.difference_update(back)
                    switch(back, 1)
            elif kind == "RESOURCE_STATE_CHANGED":
                machines = list(ProcSet.from_str(data["resources"]))
                if data["state"] == "1":
                    self.sleeping.update(machines)
                else:
                    self.usable.update(machines)
        if len(self.queue) >= 3 and self.sleeping:
            switch(sorted(self.sleeping), 0)
            self.sleeping.clear()
        while self.queue:
            job_id, res = self.queue[0]
            free = sorted(self.usable)
            if len(free) < res:
                break
            self.queue.pop(0)
            alloc = free[:res]
            self.usable.difference_update(alloc)
            self.busy[job_id] = alloc
            out.append({"timestamp": now, "type": "EXECUTE_JOB",
                        "data": {"job_id": job_id, "alloc": str(ProcSet(*alloc))}})  # fmt: skip
        return json.dumps({"now": now, "events": out})


def main() -> int:
    sock = zmq.Context.instance().socket(zmq.REP)
    sock.bind(sys.argv[1])
    decide = PstateFcfs()
    while True:
        raw = sock.recv().decode()
        sock.send_string(decide(raw))
        if '"SIMULATION_ENDS"' in raw:
            return 0


if __name__ == "__main__":
    sys.exit(main())
