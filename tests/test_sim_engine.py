"""The simulator's behaviour message by message: real-Batsim traces replayed, Batsim's rules
enforced with clear messages, profiles and timewarp's extensions."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from procset import ProcSet

from simulator import protocol as p
from simulator.engine import Deadlock, DecisionError, drive
from simulator.outputs import jobs_rows
from simulator.testing import make_sim, shared_data_dir, write_platform, write_workload

TRACE_PLATFORM = """<?xml version="1.0"?>
<platform version="4.1"><zone id="z" routing="Full">
  <host id="master_host" speed="100Mf"/>
  <host id="node0" speed="100Mf"/>
  <host id="node1" speed="100Mf"><prop id="role" value="compute_node"/></host>
</zone></platform>
"""
TRACE_WORKLOAD = {
    "nb_res": 2,
    "jobs": [
        {"id": 1, "subtime": 0, "res": 1, "profile": "delay10", "walltime": 100},
        {"id": 2, "subtime": 1, "res": 1, "profile": "compute", "walltime": 100},
        {
            "id": "j3",
            "subtime": 2,
            "res": 1,
            "profile": "delay10",
            "walltime": 5,
            "user_field": "anything",
        },
    ],
    "profiles": {
        "compute": {"type": "parallel_homogeneous", "cpu": 1e9, "com": 0},
        "delay10": {"type": "delay", "delay": 10},
    },
}


@pytest.fixture
def trace_inputs(tmp_path):
    platform = tmp_path / "platform.xml"
    platform.write_text(TRACE_PLATFORM)
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(TRACE_WORKLOAD))
    return platform, workload


class OneAtATime:
    """The trace's decision process: jobs one at a time on resource 0, a call at 3.5 s."""

    def __init__(self):
        self.queue, self.busy, self.sent = [], False, []

    def __call__(self, message):
        self.sent.append(message)
        out = []
        for event in message.events:
            if isinstance(event.data, p.SimulationBegins):
                out.append(p.Event(message.now, p.CallMeLater(3.5)))
            elif isinstance(event.data, p.JobSubmitted):
                self.queue.append(event.data.job_id)
            elif isinstance(event.data, p.JobCompleted):
                self.busy = False
        if not self.busy and self.queue:
            self.busy = True
            out.append(p.Event(message.now, p.ExecuteJob(self.queue.pop(0), ProcSet(0))))
        return p.Message(message.now, out)


def _flatten(messages):
    return [(e.timestamp, e.type, e.data.to_data()) for m in messages for e in m.events]


def test_fcfs_trace_of_real_batsim_is_reproduced_within_its_microsecond_offsets(trace_inputs):
    data = shared_data_dir()
    if data is None:
        pytest.skip("shared/data is not beside this checkout")
    lines = (data / "batsim-reference/protocol-trace/fcfs-normal.messages.log").read_text()
    real = [
        p.decode(line.partition(": ")[2], "batsim")
        for line in lines.splitlines()
        if line.startswith("BATSIM")
    ]
    sim = make_sim(*trace_inputs[:1], [trace_inputs[1]], submission_latency=0.0)
    decide = OneAtATime()
    drive(sim, decide, through_json=True)
    ours, theirs = _flatten(decide.sent), _flatten(real)
    assert len(ours) == len(theirs)
    for (t1, type1, data1), (t2, type2, data2) in zip(ours, theirs, strict=True):
        assert type1 == type2
        assert abs(t1 - t2) < 1e-3
        if type1 == "SIMULATION_BEGINS":
            data1 = {**data1, "workloads": None}
            data2 = {**data2, "workloads": None}
        assert data1 == data2
    # exact times: no SimGrid latencies
    assert [t for t, kind, _ in ours if kind == "JOB_COMPLETED"] == [10.0, 20.0, 25.0]


def test_all_event_types_of_the_second_trace(tmp_path, trace_inputs):
    platform, workload = trace_inputs
    sim = make_sim(
        platform,
        [workload],
        dynamic_jobs=True,
        acknowledge_dynamic_jobs=True,
        forward_profiles=True,
        submission_latency=0.0,
    )
    seen = []

    def decide(message):
        seen.append(message)
        now, out = message.now, []
        for event in message.events:
            data = event.data
            if isinstance(data, p.SimulationBegins):
                out += [
                    p.Query({"consumed_energy": {}}),
                    p.RegisterProfile("dyn", "d5", {"type": "delay", "delay": 5}),
                    p.RegisterJob(
                        "dyn!a",
                        {"id": "dyn!a", "subtime": 0, "res": 1, "profile": "d5", "walltime": 50},
                    ),
                    p.SetResourceState(ProcSet(1), "1"),
                    p.CallMeLater(3.0),
                ]
            elif isinstance(data, p.JobSubmitted) and data.job_id == "w0!1":
                out += [p.ExecuteJob("w0!1", ProcSet(0)), p.SetJobMetadata("w0!1", "started")]
            elif isinstance(data, p.JobSubmitted) and data.job_id == "w0!j3":
                out.append(p.RejectJob("w0!j3"))
            elif isinstance(data, p.RequestedCall):
                out += [p.KillJob(["w0!1"]), p.Notify("registration_finished")]
            elif isinstance(data, p.JobKilled):
                out.append(p.ExecuteJob("dyn!a", ProcSet(0)))
            elif isinstance(data, p.JobCompleted) and data.job_id == "dyn!a":
                out.append(p.ExecuteJob("w0!2", ProcSet(0)))
        return p.Message(now, [p.Event(now, d) for d in out])

    drive(sim, decide, through_json=True)
    events = _flatten(seen)
    kinds = [kind for _, kind, _ in events]
    assert kinds.count("ANSWER") == 1 and kinds.count("RESOURCE_STATE_CHANGED") == 1
    submitted = [d for _, kind, d in events if kind == "JOB_SUBMITTED"]
    assert {d["job_id"] for d in submitted} == {"w0!1", "w0!2", "w0!j3", "dyn!a"}
    assert all(d["profile"]["type"] for d in submitted)  # forwarded profiles
    kill_message = next(m for m in seen if any(e.type == "JOB_KILLED" for e in m.events))
    assert [e.type for e in kill_message.events] == ["JOB_COMPLETED", "JOB_KILLED"]
    assert kill_message.events[0].data.job_state == "COMPLETED_KILLED"
    progress = kill_message.events[1].data.job_progress["w0!1"]
    assert progress == {"profile_name": "delay10", "progress": pytest.approx(0.3)}
    assert seen[-1].now == 18.0 and seen[-1].events[0].type == "SIMULATION_ENDS"
    rows = {row.split(",")[0]: row for row in jobs_rows(sim.job_records())}
    assert rows["w0!1".split("!")[1]].endswith(',"started"')
    assert ",REJECTED," in rows["j3"]
    assert ",COMPLETED_SUCCESSFULLY,3.000000,5.000000,8.000000," in rows["a"]


# --------------------------------------------------------------------------- Batsim's rules


def _sim_with(tmp_path, jobs, profiles=None, nodes=2, **options):
    options.setdefault("submission_latency", 0.0)
    platform = write_platform(tmp_path / "p.xml", nodes)
    workload = write_workload(
        tmp_path / "w.json", jobs, profiles or {"d": {"type": "delay", "delay": 10}}
    )
    return make_sim(platform, [workload], **options)


def _job(jid, subtime=0, res=1, profile="d", **extra):
    return {"id": jid, "subtime": subtime, "res": res, "profile": profile, **extra}


def _reply(now, *payloads):
    return p.Message(now, [p.Event(now, d) for d in payloads])


def test_executing_a_job_twice_is_refused_by_name(tmp_path):
    sim = _sim_with(tmp_path, [_job("a")])
    sim.first_message()
    sim.handle_reply(_reply(0))
    with pytest.raises(DecisionError, match=r"cannot execute job 'w0!a'.*already running"):
        sim.handle_reply(
            _reply(0, p.ExecuteJob("w0!a", ProcSet(0)), p.ExecuteJob("w0!a", ProcSet(1)))
        )


def test_busy_machine_without_compute_sharing_is_refused(tmp_path):
    sim = _sim_with(tmp_path, [_job("a"), _job("b")])
    sim.first_message()
    sim.handle_reply(_reply(0))
    with pytest.raises(DecisionError, match=r"machine 0 is busy with 'w0!a'.*compute-sharing"):
        sim.handle_reply(
            _reply(0, p.ExecuteJob("w0!a", ProcSet(0)), p.ExecuteJob("w0!b", ProcSet(0)))
        )


def test_busy_machine_is_fine_with_compute_sharing(tmp_path):
    sim = _sim_with(tmp_path, [_job("a"), _job("b")], allow_compute_sharing=True)
    sim.first_message()
    sim.handle_reply(_reply(0))
    notify = sim.handle_reply(
        _reply(0, p.ExecuteJob("w0!a", ProcSet(0)), p.ExecuteJob("w0!b", ProcSet(0)))
    )
    assert [e.type for e in notify.events] == ["NOTIFY"]  # Batsim: after the submissions
    message = sim.handle_reply(_reply(0))
    assert message.now == 10.0 and [e.data.job_id for e in message.events] == ["w0!a", "w0!b"]


@pytest.mark.parametrize(
    "payload, needle",
    [
        (p.CallMeLater(0.0), "not strictly after the current time"),
        (p.ExecuteJob("w0!zz", ProcSet(0)), "unknown job 'w0!zz'"),
        (p.ExecuteJob("w0!a", ProcSet(0, 1)), "requests res=1"),
        (p.ExecuteJob("w0!a", ProcSet(5)), "resource 5 is not a compute resource"),
        (p.ExecuteJob("w0!late", ProcSet(0)), "not submitted yet"),
        (p.KillJob(["w0!a"]), "it is submitted, not running or finished"),
        (p.RegisterJob("w0!x", {"id": "w0!x"}), "needs dynamic jobs"),
    ],
)
def test_invalid_decisions_get_clear_messages(tmp_path, payload, needle):
    sim = _sim_with(tmp_path, [_job("a"), _job("late", subtime=50)])
    sim.first_message()
    sim.handle_reply(_reply(0))
    with pytest.raises(DecisionError) as info:
        sim.handle_reply(_reply(0, payload))
    assert needle in str(info.value)
    assert "reply events[0]" in str(info.value)


def test_reply_now_cannot_go_back_in_time(tmp_path):
    sim = _sim_with(tmp_path, [_job("a", subtime=5)])
    sim.first_message()
    assert sim.handle_reply(_reply(0)).now == 5.0
    with pytest.raises(DecisionError, match="before the time of the request"):
        sim.handle_reply(_reply(4.0))


def test_a_decision_process_that_never_decides_is_a_deadlock_naming_the_jobs(tmp_path):
    sim = _sim_with(tmp_path, [_job("a")])
    sim.first_message()
    sim.handle_reply(_reply(0))  # -> NOTIFY no_more_static_job_to_submit
    sim.handle_reply(_reply(0))
    with pytest.raises(Deadlock, match=r"1 submitted job\(s\) neither executed nor rejected: w0!a"):
        sim.handle_reply(_reply(0))


def test_reply_now_later_than_request_delivers_what_happened_meanwhile_in_one_batch(tmp_path):
    sim = _sim_with(tmp_path, [_job("a"), _job("b", subtime=3), _job("c", subtime=7)])
    sim.first_message()
    sim.handle_reply(_reply(0))
    message = sim.handle_reply(p.Message(8.0, [p.Event(0.5, p.ExecuteJob("w0!a", ProcSet(0)))]))
    assert message.now == 8.0
    assert [(e.timestamp, e.type) for e in message.events] == [
        (3.0, "JOB_SUBMITTED"),
        (7.0, "JOB_SUBMITTED"),
        (7.0, "NOTIFY"),
    ]
    finished = sim.handle_reply(_reply(8.0))
    assert finished.events[0].timestamp == 10.5  # started at its event's timestamp, 0.5


def test_what_real_batsim_splits_into_several_messages_is_split_the_same_way(tmp_path):
    """Batsim's own batching (see simulator/engine.py), as the binary does it on this
    input: SIMULATION_BEGINS alone, the submissions of one subtime together, then NOTIFY
    alone; 16 jobs started by one reply start 1e-10 s apart, SimGrid ends those within
    1e-9 s of the first together — 10 here, with its float rounding (11 with Batkube's
    170 s jobs) — and, the decision process answering at once, each later one alone, all
    at the same printed time (tests/test_batsim_real.py compares with the binary)."""
    sim = _sim_with(tmp_path, [_job(str(i)) for i in range(16)], nodes=16)
    assert [e.type for e in sim.first_message().events] == ["SIMULATION_BEGINS"]
    submitted = sim.handle_reply(_reply(0))
    assert [e.type for e in submitted.events] == ["JOB_SUBMITTED"] * 16
    ids = [e.data.job_id for e in submitted.events]
    run = [p.ExecuteJob(job_id, ProcSet(i)) for i, job_id in enumerate(ids)]
    assert [e.type for e in sim.handle_reply(_reply(0, *run)).events] == ["NOTIFY"]
    batches = [sim.handle_reply(_reply(0))]
    while batches[-1].events[0].type == "JOB_COMPLETED":
        batches.append(sim.handle_reply(_reply(10.0)))
    assert [m.now for m in batches] == [10.0] * 8
    assert [len(m.events) for m in batches[:-1]] == [10, 1, 1, 1, 1, 1, 1]
    assert [e.data.job_id for m in batches[:-1] for e in m.events] == ids
    assert batches[-1].events[0].type == "SIMULATION_ENDS"


# --------------------------------------------------------------------------- execution models


def _run_all_at_zero(sim, allocs):
    """Execute every job at its submission on the given allocation; return finish times."""

    def decide(message):
        out = [
            p.ExecuteJob(e.data.job_id, ProcSet(*allocs[e.data.job_id]))
            for e in message.events
            if isinstance(e.data, p.JobSubmitted)
        ]
        return _reply(message.now, *out)

    drive(sim, decide)
    # Batsim's sub-microsecond offsets aside (it prints times with %f)
    return {r.job.job_id: p.wire_time(r.finish) for r in sim.job_records()}


def test_parallel_homogeneous_runs_flops_over_host_speed_and_composed_repeats(tmp_path):
    profiles = {
        "flops": {"type": "parallel_homogeneous", "cpu": 5e9, "com": 0},
        "d": {"type": "delay", "delay": 2},
        "seq": {"type": "composed", "repeat": 3, "seq": ["d", "flops"]},
    }
    sim = _sim_with(tmp_path, [_job("f", profile="flops"), _job("s", profile="seq")], profiles)
    finish = _run_all_at_zero(sim, {"w0!f": [0], "w0!s": [1]})
    assert finish == {"w0!f": 5.0, "w0!s": 21.0}  # 1Gf hosts


def test_walltime_ends_a_job_with_completed_walltime_reached(tmp_path):
    sim = _sim_with(tmp_path, [_job("a", walltime=4)])
    finish = _run_all_at_zero(sim, {"w0!a": [0]})
    record = sim.records["w0!a"]
    assert finish["w0!a"] == 4.0 and record.final_state == "COMPLETED_WALLTIME_REACHED"
    assert record.return_code == -1


def test_per_node_class_durations(tmp_path):
    platform = write_platform(
        tmp_path / "p.xml", 2, props={0: {"node_class": "gpu"}, 1: {"node_class": "cpu"}}
    )
    profile = {"type": "delay", "delay": 600, "timewarp": {"durations": {"gpu": 100}}}
    workload = write_workload(tmp_path / "w.json", [_job("g"), _job("c")], {"d": profile})
    sim = make_sim(platform, [workload], submission_latency=0.0)
    assert _run_all_at_zero(sim, {"w0!g": [0], "w0!c": [1]}) == {"w0!g": 100.0, "w0!c": 600.0}


def test_sharing_slowdown_divides_progress_by_the_number_of_jobs_on_the_node(tmp_path):
    profile = {"type": "delay", "delay": 100, "timewarp": {"sharing_slowdown": True}}
    jobs = [_job("a"), _job("b", subtime=50), _job("alone", subtime=0)]
    sim = _sim_with(tmp_path, jobs, {"d": profile}, allow_compute_sharing=True)
    finish = _run_all_at_zero(sim, {"w0!a": [0], "w0!b": [0], "w0!alone": [1]})
    # a: 50 s alone, then half speed for its last 50 s of work -> 150; b: 50 s of work at
    # half speed until 150, then alone -> 200
    assert finish == {"w0!a": 150.0, "w0!b": 200.0, "w0!alone": 100.0}


def test_usage_profile_and_kubernetes_fields_pass_through_to_the_decision_process(tmp_path):
    profile = {
        "type": "delay",
        "delay": 100,
        "cpu": "500m",
        "memory": "1Gi",
        "scheduler": "my-scheduler",
        "timewarp": {"usage": {"cpu": [[0, 0.1], [30, 0.4]], "memory": [[0, "200Mi"]]}},
    }
    sim = _sim_with(tmp_path, [_job("a", priority="high")], {"d": profile}, forward_profiles=True)
    begins = sim.first_message().events[0].data
    assert begins.profiles["w0"]["d"] == profile
    submitted = sim.handle_reply(_reply(0)).events[0].data
    assert submitted.profile == profile
    assert submitted.job == {
        "id": "w0!a",
        "subtime": 0,
        "res": 1,
        "profile": "d",
        "priority": "high",
    }


def test_several_workloads_are_w0_w1_and_equal_subtimes_go_in_batsims_order(tmp_path):
    platform = write_platform(tmp_path / "p.xml", 2)
    first = write_workload(
        tmp_path / "a.json",
        [_job("2"), _job("10"), _job("1", subtime=1)],
        {"d": {"type": "delay", "delay": 1}},
    )
    second = write_workload(tmp_path / "b.json", [_job("1")], {"d": {"type": "delay", "delay": 2}})
    sim = make_sim(platform, [first, second], submission_latency=0.0)
    begins = sim.first_message().events[0].data
    assert begins.workloads == {"w0": str(first), "w1": str(second)}
    assert set(begins.profiles) == {"w0", "w1"}
    message = sim.handle_reply(_reply(0))
    assert [e.data.job_id for e in message.events] == ["w0!10", "w0!2", "w1!1"]
    finish = {}

    def decide(msg):
        out = []
        for e in msg.events:
            if isinstance(e.data, p.JobSubmitted):
                out.append(p.ExecuteJob(e.data.job_id, ProcSet(0)))
        return _reply(msg.now, *out)

    sim2 = make_sim(platform, [first, second], submission_latency=0.0, allow_compute_sharing=True)
    drive(sim2, decide)
    finish = {r.job.job_id: p.wire_time(r.finish) for r in sim2.job_records()}
    assert finish == {"w0!10": 1.0, "w0!2": 1.0, "w1!1": 2.0, "w0!1": 2.0}


def test_storage_sharing_flag_reaches_simulation_begins(tmp_path):
    sim = _sim_with(tmp_path, [_job("a")], allow_storage_sharing=False)
    assert sim.first_message().events[0].data.allow_storage_sharing is False


@pytest.mark.parametrize("rule", ["remaining", "restart"])
def test_replacement_rule_is_a_known_timewarp_extension(tmp_path, rule):
    profile = {"type": "delay", "delay": 60, "timewarp": {"replacement": rule}}
    sim = _sim_with(tmp_path, [_job("a")], {"d": profile}, forward_profiles=True)
    assert sim.first_message().events[0].data.profiles["w0"]["d"] == profile


def test_an_unknown_replacement_rule_is_rejected_with_its_place(tmp_path):
    from simulator.workload import WorkloadError

    profile = {"type": "delay", "delay": 60, "timewarp": {"replacement": "resume"}}
    with pytest.raises(WorkloadError, match=r"timewarp\.replacement: expected one of"):
        _sim_with(tmp_path, [_job("a")], {"d": profile})


@settings(max_examples=500)
@given(st.floats(min_value=0.0, allow_infinity=False, allow_nan=False) | st.integers(0, 10**12))
def test_long_double_from_a_clock_value_by_addition_is_its_constructor(seconds):
    """The machine accounting's ``_LONG_ZERO + now`` stands for ``numpy.longdouble(now)``
    (cheaper): the same long double, for every clock value (a non-negative double)."""
    import numpy

    from simulator.engine import _LONG_ZERO

    seconds = float(seconds)
    fast, slow = _LONG_ZERO + seconds, numpy.longdouble(seconds)
    assert type(fast) is numpy.longdouble
    assert fast == slow and numpy.signbit(fast) == numpy.signbit(slow)
    assert fast + numpy.longdouble(1e-300) == slow + numpy.longdouble(1e-300)
