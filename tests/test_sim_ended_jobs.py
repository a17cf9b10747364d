"""What the simulator keeps of a job whose jobs.csv row is written (``simulator/ended_jobs.py``,
``simulator/id_set.py``): with streamed outputs an ended job leaves ``records`` (its
parsed job with it), its id stays answered as Batsim answers it, and the ids of a dense
range cost a bit each — what the simulation holds is flat in the number of jobs that ended.
"""

from __future__ import annotations

import gc
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st
from procset import ProcSet

from simulator import protocol as p
from simulator.engine import DecisionError, JobRecord, drive
from simulator.id_set import JobIdSet
from simulator.outputs import StreamingOutputs, job_row, jobs_rows
from simulator.testing import make_sim, write_platform, write_workload

# ------------------------------------------------------------------ JobIdSet


def test_a_dense_range_of_ids_costs_a_bit_each():
    ids = JobIdSet()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(1, 100_001):
            ids.add(f"w0!{n}")
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(ids) == 100_000
    assert "w0!1" in ids and "w0!100000" in ids and "w0!100001" not in ids and "w0!0" not in ids
    assert ids.nbytes() <= 100_001 // 8 + 1
    # a set of these strings holds ~130 bytes per id (~13 MB); the bitmap 12.5 kB
    assert held < 64 * 1024


_LOCAL = st.one_of(
    st.integers(min_value=0, max_value=3000).map(str),
    st.integers(min_value=0, max_value=10**30).map(str),  # far out: not in a bitmap
    st.sampled_from(["01", "007", "a", "", "١٢", "1!2", "-3", "+4", " 5"]),
    st.text(max_size=4),
)
_IDS = st.lists(
    st.builds(lambda w, local: f"{w}!{local}" if w is not None else local,
              st.sampled_from(["w0", "w1", "", "a!b", None]), _LOCAL),
    max_size=60,
)  # fmt: skip


@given(_IDS, _IDS)
def test_it_is_a_set_of_strings(added, probed):
    ids, reference = JobIdSet(added), set(added)
    assert len(ids) == len(reference)
    for job_id in added + probed:
        assert (job_id in ids) == (job_id in reference), job_id


# ------------------------------------------------------------------ the simulator


class _Rows:
    """A sink that writes each ended job's row as StreamingOutputs does."""

    def __init__(self) -> None:
        self.rows: list[str] = []

    def job_ended(self, record: JobRecord) -> None:
        self.rows.append(job_row(record))

    def machine_row(self, *_: object) -> None:
        pass


def _sim(tmp_path, jobs):
    tmp_path.mkdir(parents=True, exist_ok=True)
    platform = write_platform(tmp_path / "p.xml", 2)
    workload = write_workload(tmp_path / "w.json", jobs, {"d": {"type": "delay", "delay": 3}})
    return make_sim(platform, [workload], dynamic_jobs=True)


def _jobs(n):
    return [{"id": str(i), "subtime": 2 * i, "res": 1, "profile": "d"} for i in range(1, n + 1)]


def _fcfs(live=None):
    """Each submitted job on a free machine at once; ``live`` gets the number of JobRecords
    alive when job 100 ends."""
    free = [0, 1]
    on: dict[str, int] = {}

    def decide(message):
        out = []
        for event in message.events:
            if isinstance(event.data, p.JobCompleted):
                if live is not None and event.data.job_id == "w0!100":
                    gc.collect()  # earlier tests' records
                    live.append(sum(isinstance(o, JobRecord) for o in gc.get_objects()))
                free.append(on.pop(event.data.job_id))
            elif isinstance(event.data, p.JobSubmitted):
                on[event.data.job_id] = free.pop(0)
                out.append(p.ExecuteJob(event.data.job_id, ProcSet(on[event.data.job_id])))
        if any(isinstance(e.data, p.Notify) for e in message.events):
            out.append(p.Notify("registration_finished"))
        return p.Message(message.now, [p.Event(message.now, d) for d in out])

    return decide


def test_streamed_rows_are_those_of_a_run_that_keeps_every_job(tmp_path):
    kept = _sim(tmp_path / "a", _jobs(30))
    drive(kept, _fcfs())
    streamed, sink = _sim(tmp_path / "b", _jobs(30)), _Rows()
    streamed.stream_to(sink)
    drive(streamed, _fcfs())
    assert sink.rows == jobs_rows(kept.job_records())[1:]
    assert len(kept.records) == 30 and streamed.records == {}  # each ended job left
    assert streamed.jobs_count == kept.jobs_count == 30 and len(streamed.ended_jobs) == 30


def test_streamed_outputs_do_not_change_a_message(tmp_path):
    """Forgetting an ended job's record (streamed outputs, as `timewarp sim` writes them)
    leaves the messages as Batsim sends them: JOB_COMPLETED still names the job's
    allocation."""
    sent = {"kept": [], "streamed": []}

    def recording(name):
        decide = _fcfs()

        def record(message):
            sent[name].append(p.encode(message))
            return decide(message)

        return record

    drive(_sim(tmp_path / "a", _jobs(12)), recording("kept"))
    streamed = _sim(tmp_path / "b", _jobs(12))
    streamed.stream_to(_Rows())
    drive(streamed, recording("streamed"))
    # (SIMULATION_BEGINS names the workload's file: each run has its own folder)
    assert sent["streamed"][1:] == sent["kept"][1:] and len(sent["kept"]) > 12
    completed = [m for m in sent["streamed"] if "JOB_COMPLETED" in m]
    assert completed and all('"alloc":""' not in m for m in completed)


def test_the_records_alive_are_those_of_jobs_not_ended(tmp_path):
    """Not the submitter's list, nor the workload's: mid-run, only the jobs to come."""
    sim, live = _sim(tmp_path, _jobs(200)), []
    sim.stream_to(_Rows())
    drive(sim, _fcfs(live))
    assert live and live[0] <= 110  # 100 jobs still to come, one or two running; not 200


def _ended_sim(tmp_path):
    """Job 1 ended; job 2 submitted, not executed (rejected later by the tests)."""
    jobs = [{"id": str(i), "subtime": 100 * (i - 1), "res": 1, "profile": "d"} for i in (1, 2)]
    sim = _sim(tmp_path, jobs)
    sim.stream_to(_Rows())
    sim.first_message()
    message = sim.handle_reply(p.Message(0, []))  # job 1 submitted
    assert any(isinstance(e.data, p.JobSubmitted) for e in message.events)
    message = sim.handle_reply(p.Message(0, [p.Event(0, p.ExecuteJob("w0!1", ProcSet(0)))]))
    while not any(isinstance(e.data, p.JobCompleted) for e in message.events):
        message = sim.handle_reply(p.Message(message.now, []))
    assert "w0!1" not in sim.records and "w0!1" in sim.ended_jobs
    return sim, message.now


def test_an_ended_job_is_answered_as_batsim_answers_it(tmp_path):
    sim, now = _ended_sim(tmp_path)
    try:
        sim.handle_reply(p.Message(now, [p.Event(now, p.ExecuteJob("w0!1", ProcSet(1)))]))
        raise AssertionError("executed twice")
    except DecisionError as exc:
        assert "cannot execute job 'w0!1': it already finished (COMPLETED_SUCCESSFULLY)" in str(exc)
    sim, now = _ended_sim(tmp_path / "again")
    register = p.RegisterJob("w0!1", {"id": "w0!1", "subtime": 0, "res": 1, "profile": "d"})
    try:
        sim.handle_reply(p.Message(now, [p.Event(now, register)]))
        raise AssertionError("registered twice")
    except DecisionError as exc:
        assert "job 'w0!1' already exists" in str(exc)


def test_a_kill_of_an_ended_job_is_acknowledged_once(tmp_path):
    sim, now = _ended_sim(tmp_path)
    kill = p.Event(now, p.KillJob(["w0!1"]))
    message = sim.handle_reply(p.Message(now, [kill]))
    killed = [e.data for e in message.events if isinstance(e.data, p.JobKilled)]
    assert [k.job_ids for k in killed] == [["w0!1"]]
    message = sim.handle_reply(p.Message(message.now, [p.Event(message.now, kill.data)]))
    assert not any(isinstance(e.data, p.JobKilled) for e in message.events)  # ignored


# ------------------------------------------------------------------ rows held, then written


def _stream(tmp_path, jobs, hold, write_every):
    """A streamed run with StreamingOutputs holding up to ``hold`` rows, written every
    ``write_every`` messages as the runner does while waiting (0: never); the files."""
    sim = _sim(tmp_path, jobs)
    outputs = StreamingOutputs(str(tmp_path / "out"), sim.nb_compute)
    outputs.HOLD = hold
    sim.stream_to(outputs)
    decide, count = _fcfs(), [0]

    def decide_and_write(message):
        count[0] += 1
        if write_every and count[0] % write_every == 0:
            outputs.write_held()
        return decide(message)

    drive(sim, decide_and_write)
    paths = outputs.finish(sim.machines, 0.0, 0.0)
    return [path.read_bytes() for path in paths], outputs.sums.jobs


@settings(max_examples=15, deadline=None)
@given(hold=st.integers(1, 40), write_every=st.integers(0, 7), n=st.integers(1, 40))
def test_rows_held_then_written_are_the_rows_written_at_once(
    tmp_path_factory, hold, write_every, n
):
    """Each ended job's row and sums, held (what they read of the record, which the
    engine forgets at once) and written later — every ``write_every`` messages as the
    runner does while the decision process computes, every ``hold`` rows, at the end —
    give the files of rows written as each job ends (a sink that formats at once)."""
    base = tmp_path_factory.mktemp("held")
    held, ended = _stream(base / "a", _jobs(n), hold, write_every)
    at_once, sink = _sim(base / "b", _jobs(n)), _Rows()
    at_once.stream_to(sink)
    drive(at_once, _fcfs())
    assert held[0].decode().splitlines()[1:] == sink.rows
    assert ended == n
    reference, _ = _stream(base / "c", _jobs(n), 1, 0)  # every row written as it comes
    assert held == reference


def test_the_runner_writes_held_rows_after_sending_before_the_reply(monkeypatch):
    """run() over a plain socket calls ``while_waiting`` once per message, after the send
    and before the reply is read (the rows' formatting overlaps the decision process)."""
    from simulator import runner, zmtp

    calls: list[str] = []

    class FakeReq:
        def __init__(self, endpoint):
            self.sock = object()

        def send(self, data):
            calls.append("send")

        def recv(self, wait):
            calls.append("recv")
            return b'{"now":0.0,"events":[]}'

        def close(self):
            pass

    monkeypatch.setattr(zmtp, "ReqSocket", FakeReq)

    class Sim:
        ended, now = False, 0.0
        sent = 0

        def first_message(self):
            return p.Message(0.0, [])

        def handle_reply(self, reply):
            self.sent += 1
            self.ended = self.sent == 2
            return p.Message(0.0, [])

    runner.run(Sim(), "tcp://127.0.0.1:9", while_waiting=lambda: calls.append("write"))  # type: ignore[arg-type]
    assert calls == ["send", "write", "recv"] * 3
