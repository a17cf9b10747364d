"""Properties over random workloads and random (valid) decision processes."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st
from procset import ProcSet

from simulator import protocol as p
from simulator.engine import Options, Simulator, drive
from simulator.kernel import PRECISION
from simulator.outputs import jobs_rows, machine_state_rows
from simulator.platform import Host, Platform
from simulator.workload import Workload, parse_job

DELAYS = [0, 1, 2.5, 7, 10]


@st.composite
def scenarios(draw):
    nodes = draw(st.integers(1, 4))
    sharing = draw(st.booleans())
    profiles = {f"d{i}": {"type": "delay", "delay": d} for i, d in enumerate(DELAYS)}
    profiles["slow"] = {"type": "delay", "delay": 6, "timewarp": {"sharing_slowdown": True}}
    jobs = []
    for i in range(draw(st.integers(1, 10))):
        job = {
            "id": str(i),
            "subtime": draw(st.sampled_from([0, 0, 1, 3.5, 8])),
            "res": draw(st.integers(1, nodes)),
            "profile": draw(st.sampled_from(sorted(profiles))),
        }
        if draw(st.booleans()):
            job["walltime"] = draw(st.sampled_from([0.5, 4, 100]))
        jobs.append(job)
    seed = draw(st.integers(0, 2**16))
    return nodes, sharing, jobs, profiles, seed


def _simulator(nodes, sharing, jobs, profiles) -> Simulator:
    master = Host("master_host", 1e9, 1, {"role": "master"})
    compute = [Host(f"n{i}", 1e9, 1, {}) for i in range(nodes)]
    platform = Platform("mem.xml", master, compute, [])
    parsed = [parse_job(j, "w0", profiles, nodes, f"jobs[{i}]", i) for i, j in enumerate(jobs)]
    workload = Workload("w0", "mem.json", parsed, profiles)
    return Simulator(platform, [workload], Options(allow_compute_sharing=sharing))


class RandomDecisions:
    """Executes, rejects, kills and asks for calls at random, always within the rules,
    and always making progress (an idle platform starts the head job)."""

    def __init__(self, nodes: int, sharing: bool, seed: int) -> None:
        self.rng = random.Random(seed)
        self.nodes, self.sharing = nodes, sharing
        self.waiting: list[tuple[str, int]] = []
        self.running: dict[str, ProcSet] = {}
        self.busy: Counter[int] = Counter()
        self.received: list[p.Message] = []
        self.decided: dict[str, tuple[float, ProcSet]] = {}
        self.pending_calls = 0

    def _free(self) -> list[int]:
        return [n for n in range(self.nodes) if self.sharing or not self.busy[n]]

    def __call__(self, message: p.Message) -> p.Message:
        self.received.append(message)
        rng = self.rng
        now = message.now + rng.choice([0, 0, 0.25])
        out: list[p.Payload] = []
        for event in message.events:
            data = event.data
            if isinstance(data, p.JobSubmitted):
                self.waiting.append((data.job_id, data.job["res"]))
            elif isinstance(data, p.JobCompleted) and data.job_id in self.running:
                for n in self.running.pop(data.job_id):
                    self.busy[n] -= 1
            elif isinstance(data, p.RequestedCall):
                self.pending_calls -= 1
        for job_id, res in list(self.waiting):
            roll = rng.random()
            free = self._free()
            if roll < 0.1:
                out.append(p.RejectJob(job_id))
            elif roll < 0.8 and len(free) >= res:
                out.append(self._execute(job_id, res, rng.sample(free, res), now))
            else:
                continue
            self.waiting.remove((job_id, res))
        if self.running and rng.random() < 0.1:
            victim = rng.choice(sorted(self.running))
            out.append(p.KillJob([victim]))
        if rng.random() < 0.2:
            self.pending_calls += 1
            out.append(p.CallMeLater(now + rng.choice([0.5, 3])))
        if (
            not self.running
            and self.waiting
            and not any(isinstance(d, p.ExecuteJob | p.KillJob) for d in out)
        ):
            job_id, res = self.waiting.pop(0)
            out.append(self._execute(job_id, res, list(range(res)), now))
        return p.Message(now, [p.Event(now, d) for d in out])

    def _execute(self, job_id: str, res: int, nodes: list[int], now: float) -> p.ExecuteJob:
        alloc = ProcSet(*nodes)
        self.running[job_id] = alloc
        for n in alloc:
            self.busy[n] += 1
        self.decided[job_id] = (now, alloc)
        return p.ExecuteJob(job_id, alloc)


def _run(scenario):
    nodes, sharing, jobs, profiles, seed = scenario
    sim = _simulator(nodes, sharing, jobs, profiles)
    decide = RandomDecisions(nodes, sharing, seed)
    drive(sim, decide, through_json=True)
    return sim, decide


@given(scenarios())
def test_every_job_ends_exactly_once_after_its_causes(scenario):
    sim, decide = _run(scenario)
    events = [(m.now, e) for m in decide.received for e in m.events]
    ends = Counter(e.data.job_id for _, e in events if e.type == "JOB_COMPLETED")
    for job_id, record in sim.records.items():
        if record.state == "rejected":
            assert ends[job_id] == 0
        else:
            assert record.state == "done" and ends[job_id] == 1, job_id
    last = 0.0
    for now, event in events:  # time never goes back, no event after its message's now
        assert last <= event.timestamp <= now
        last = event.timestamp
    submitted = {e.data.job_id: e.timestamp for _, e in events if e.type == "JOB_SUBMITTED"}
    for job_id, record in sim.records.items():
        assert submitted[job_id] >= record.job.subtime
        if record.state == "done":
            assert submitted[job_id] <= record.start <= record.finish
    assert events[-1][1].type == "SIMULATION_ENDS"


@given(scenarios())
def test_outputs_are_consistent_with_the_decisions(scenario):
    sim, decide = _run(scenario)
    profiles = scenario[3]
    for job_id, record in sim.records.items():
        if record.state != "done":
            continue
        decided_at, alloc = decide.decided[job_id]
        # Batsim's clock runs 1e-10 s per internal message ahead of the printed time, and
        # SimGrid ends a sleep up to its 1e-9 s precision early
        assert p.wire_time(record.start) == decided_at and record.alloc == alloc
        execution = record.finish - record.start
        delay = profiles[record.job.profile]["delay"]
        walltime = record.job.walltime
        if record.final_state == "COMPLETED_SUCCESSFULLY":
            if profiles[record.job.profile].get("timewarp"):
                assert execution >= delay - 1e-9  # slowed down by sharing, never sped up
            else:
                assert abs(record.finish - (record.start + delay)) <= PRECISION
        elif record.final_state == "COMPLETED_WALLTIME_REACHED":
            assert abs(record.finish - (record.start + walltime)) <= PRECISION
        else:
            assert record.final_state == "COMPLETED_KILLED"
    rows = jobs_rows(sim.job_records())[1:]
    assert len(rows) == len(sim.records)
    states = machine_state_rows(sim.machines)[1:]
    if states:
        assert states[-1].endswith(f",{scenario[0]},0")  # everything idle at the end


@given(scenarios())
def test_same_inputs_and_decisions_give_the_same_bytes(scenario):
    first, decide1 = _run(scenario)
    second, decide2 = _run(scenario)
    assert [p.encode(m) for m in decide1.received] == [p.encode(m) for m in decide2.received]
    assert jobs_rows(first.job_records()) == jobs_rows(second.job_records())
    assert machine_state_rows(first.machines) == machine_state_rows(second.machines)
