"""What the simulator holds of a job not yet submitted (``simulator/pending_jobs.py``):
validated at start as before, then kept as its compact JSON text until its submitter
pops it, so the workload waiting for its subtimes costs ~0.1 KiB per job, not ~0.9; the
job built late is the job parsed eagerly, and a decision naming it early gets the same
answers."""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st
from procset import ProcSet

from simulator import protocol as p
from simulator.engine import DecisionError
from simulator.pending_jobs import PendingJobs, submission_key
from simulator.testing import make_sim, write_platform, write_workload
from simulator.workload import load_workload

PROFILES = {f"delay{d}": {"type": "delay", "delay": d} for d in range(1, 400)}


def _poisson_like(n: int) -> list[dict]:
    """Jobs as ``timewarp workload poisson`` writes them (the scale benchmarks' input)."""
    return [
        {"id": str(i), "subtime": round(i * 0.371, 3), "res": 1, "profile": f"delay{i % 399 + 1}"}
        for i in range(1, n + 1)
    ]


def _held_bytes(tmp_path, n: int) -> int:
    platform = write_platform(tmp_path / "p.xml", 4)
    workload = write_workload(tmp_path / f"w{n}.json", _poisson_like(n), PROFILES)
    gc.collect()
    tracemalloc.start()
    try:
        sim = make_sim(platform, [workload])
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert sim.jobs_count == n
    return held


def test_a_pending_job_is_held_in_about_a_tenth_of_a_kib(tmp_path):
    # the growth between two sizes: the platform and profiles cancel out. Parsed eagerly
    # (JobRecord + Job + its dict + ids) a job costs ~800 bytes; held as text, ~120
    per_job = (_held_bytes(tmp_path, 6000) - _held_bytes(tmp_path, 3000)) / 3000
    assert per_job < 250, f"{per_job:.0f} bytes per pending job"


_EXTRA = st.dictionaries(
    st.text(max_size=6).filter(lambda k: k not in ("id", "subtime", "res", "profile", "walltime")),
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        max_leaves=6,
    ),
    max_size=3,
)
_JOB = st.fixed_dictionaries(
    {
        "id": st.one_of(
            st.integers(0, 10**20), st.text(min_size=1, max_size=4).filter(lambda s: "!" not in s)
        ),
        "subtime": st.one_of(
            st.integers(0, 100), st.floats(0, 1e9, allow_nan=False, allow_infinity=False)
        ),
        "res": st.integers(1, 4),
        "profile": st.sampled_from(["a", "b"]),
    },
    optional={"walltime": st.one_of(st.none(), st.just(-1), st.floats(0.5, 1e6))},
).flatmap(lambda job: _EXTRA.map(lambda extra: {**extra, **job}))


@given(st.lists(_JOB, max_size=12, unique_by=lambda j: str(j["id"])))
def test_a_job_built_late_equals_the_job_parsed_eagerly(tmp_path_factory, jobs):
    path = tmp_path_factory.mktemp("w") / "w.json"
    profiles = {"a": {"type": "delay", "delay": 1}, "b": {"type": "delay", "delay": 2}}
    path.write_text(json.dumps({"nb_res": 4, "jobs": jobs, "profiles": profiles}))
    eager = load_workload(path, "w0", 4).jobs
    pending = PendingJobs("w0", eager)
    expected = sorted(eager, key=submission_key)
    assert list(pending) == expected  # iterating builds them and keeps them held
    assert len(pending) == len(eager)
    late = [pending.pop() for _ in range(len(eager))]
    assert late == expected and len(pending) == 0
    for built, parsed in zip(late, expected, strict=True):
        assert list(built.raw) == list(parsed.raw)  # the keys' order too (JOB_SUBMITTED)


def _two_job_sim(tmp_path, **options):
    jobs = [
        {"id": "a", "subtime": 0, "res": 1, "profile": "p"},
        {"id": "next", "subtime": 50, "res": 1, "profile": "p"},  # popped, sleeping to 50
        {"id": "late", "subtime": 100, "res": 1, "profile": "p"},  # still held as text
    ]
    return make_sim(
        write_platform(tmp_path / "p.xml", 2),
        [write_workload(tmp_path / "w.json", jobs, {"p": {"type": "delay", "delay": 10}})],
        **options,
    )


def _reply(now: float, *payloads: p.Payload) -> p.Message:
    return p.Message(now, [p.Event(now, payload) for payload in payloads])


def test_a_job_named_before_its_submission_keeps_what_it_was_given(tmp_path):
    sim = _two_job_sim(tmp_path)
    sim.first_message()
    sim.handle_reply(_reply(0))  # w0!a submitted; w0!late still held as text
    assert sim.jobs_count == 3 and "w0!late" not in sim.records
    assert [r.job.job_id for r in sim.job_records()] == ["w0!a", "w0!late", "w0!next"]
    message = sim.handle_reply(
        _reply(0, p.SetJobMetadata("w0!late", "early"), p.ExecuteJob("w0!a", ProcSet(0)))
    )
    assert sim.records["w0!late"].metadata == "early" and sim.jobs_count == 3
    rows = {r.job.job_id: r for r in sim.job_records()}
    assert sorted(rows) == ["w0!a", "w0!late", "w0!next"] and rows["w0!late"].state == "pending"

    def decide(message: p.Message) -> p.Message:
        for event in message.events:
            if isinstance(event.data, p.JobSubmitted):
                return _reply(message.now, p.ExecuteJob(event.data.job_id, ProcSet(0)))
        return _reply(message.now)

    for _ in range(100):
        if sim.ended:
            break
        message = sim.handle_reply(decide(message))
    late = sim.records["w0!late"]
    assert late.state == "done" and late.metadata == "early" and late.submission_time == 100


def test_a_pending_id_is_taken_and_executing_it_early_is_refused(tmp_path):
    sim = _two_job_sim(tmp_path, dynamic_jobs=True)
    sim.first_message()
    sim.handle_reply(_reply(0))
    register = p.RegisterJob("w0!late", {"id": "w0!late", "subtime": 0, "res": 1, "profile": "p"})
    with pytest.raises(DecisionError, match="job 'w0!late' already exists"):
        sim.handle_reply(_reply(0, register))
    sim = _two_job_sim(tmp_path)
    sim.first_message()
    sim.handle_reply(_reply(0))
    with pytest.raises(DecisionError, match=r"w0!late'.*not submitted yet \(subtime 100.0\)"):
        sim.handle_reply(_reply(0, p.ExecuteJob("w0!late", ProcSet(0))))
