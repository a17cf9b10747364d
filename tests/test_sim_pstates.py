"""Power states under -E: ``sleep_pstates`` read as Batsim 4.2.1's machines.cpp reads it, and
the SET_RESOURCE_STATE requests Batsim cannot follow refused by name (the switches it does
follow are compared with the real binary in ``test_sim_energy_real.py``)."""

from __future__ import annotations

import pytest
from procset import ProcSet

from simulator import protocol as p
from simulator.engine import DecisionError
from simulator.network import PlatformError
from simulator.pstates import COMPUTATION, SLEEP, TRANSITION, host_pstates
from simulator.testing import make_sim, write_workload

SPEEDS = (1e8, 1.0, 0.5, 0.25, 5e7)


def test_a_sleep_triplet_is_sleep_off_on():
    found = host_pstates({"sleep_pstates": "1:2:3"}, SPEEDS, "h")
    assert found.kinds == (COMPUTATION, SLEEP, TRANSITION, TRANSITION, COMPUTATION)
    assert found.sleep == {1: (2, 3)}


def test_what_batsim_only_logs_is_accepted_as_batsim_runs_it():
    # "1:1:1": Batsim logs nothing fatal and state 1 ends a transition (the existing -E
    # real-Batsim test runs such a host); "1::2:3" is three states (token_compress_on)
    assert host_pstates({"sleep_pstates": "1:1:1"}, SPEEDS, "h").kinds[1] == TRANSITION
    assert host_pstates({"sleep_pstates": "1::2:3"}, SPEEDS, "h").sleep == {1: (2, 3)}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1:2", "is not 'sleep:off:on'"),
        ("1:2:3,", "'' is not 'sleep:off:on'"),  # Batsim aborts on the empty part too
        ("1:2:x", "three unsigned integers"),
        ("1:2:9", "power state 9 does not exist"),
        ("1:2:3,2:1:4", "power state 1 is a transition and a sleep state"),
    ],
)
def test_what_batsim_aborts_on_is_refused_with_the_reason(text, why):
    with pytest.raises(PlatformError, match=why):
        host_pstates({"sleep_pstates": text}, SPEEDS, "h")


def test_a_computation_state_of_no_speed_is_refused():
    with pytest.raises(PlatformError, match="computation power state 4 has speed 0"):
        host_pstates({"sleep_pstates": "1:2:3"}, (*SPEEDS[:4], 0.0), "h")


def _sim(tmp_path):
    host = (
        '<host id="n{i}" speed="100Mf, 1f, 0.5f, 0.25f, 50Mf">'
        '<prop id="wattage_per_state" value="30:100, 9:9, 100:100, 90:90, 20:60"/>'
        '<prop id="sleep_pstates" value="1:2:3"/></host>'
    )
    platform = tmp_path / "p.xml"
    platform.write_text(
        '<?xml version="1.0"?>\n<platform version="4.1"><zone id="z" routing="Full">'
        '<host id="master_host" speed="1Gf"><prop id="wattage_per_state" value="1:2"/></host>'
        + "".join(host.format(i=i) for i in range(3))
        + "</zone></platform>\n"
    )
    jobs = [{"id": "a", "subtime": 0, "res": 1, "profile": "d"}]
    workload = write_workload(tmp_path / "w.json", jobs, {"d": {"type": "delay", "delay": 10}})
    sim = make_sim(platform, [workload], energy=True, submission_latency=0.0)
    sim.first_message()
    assert sim.handle_reply(_reply(0)).events[0].type == "JOB_SUBMITTED"
    return sim


def _reply(now, *payloads):
    return p.Message(now, [p.Event(now, d) for d in payloads])


@pytest.mark.parametrize(
    ("payloads", "why"),
    [
        ([p.SetResourceState(ProcSet(0), "2")], "power state 2 is a transition one"),
        ([p.SetResourceState(ProcSet(0), "7")], "machine 0 has no power state 7"),
        ([p.SetResourceState(ProcSet(0), "on")], "'on' is not a power state number"),
        ([p.SetResourceState(ProcSet(5), "1")], "resource 5 is not a compute machine"),
        (  # a machine busy with a job
            [p.ExecuteJob("w0!a", ProcSet(1)), p.SetResourceState(ProcSet(1), "1")],
            "machine 1 runs job 'w0!a'",
        ),
        (  # the second request finds it switching (Batsim logs an error, never reports it)
            [p.SetResourceState(ProcSet(0), "1"), p.SetResourceState(ProcSet(0), "1")],
            r"machine 0 is switching \(virtual power state 2\)",
        ),
        (  # a job on a machine going to sleep (Batsim aborts)
            [p.SetResourceState(ProcSet(2), "1"), p.ExecuteJob("w0!a", ProcSet(2))],
            "machine 2 is in power state 2, not a computation one",
        ),
    ],
)
def test_requests_batsim_cannot_follow_are_refused_by_name(tmp_path, payloads, why):
    sim = _sim(tmp_path)
    with pytest.raises(DecisionError, match=why):
        sim.handle_reply(_reply(0, *payloads))


def test_a_switch_takes_one_flop_at_its_virtual_state(tmp_path):
    sim = _sim(tmp_path)
    message = sim.handle_reply(_reply(0, p.SetResourceState(ProcSet(0, 1), "1")))
    while not any(e.type == "RESOURCE_STATE_CHANGED" for e in message.events):
        message = sim.handle_reply(_reply(message.now))
    assert message.now == pytest.approx(2.0)  # 1 flop at 0.5 flop/s, both machines at once
    assert [str(e.data.resources) for e in message.events] == ["0-1"]
    message = sim.handle_reply(_reply(message.now, p.SetResourceState(ProcSet(0), "0")))
    while not any(e.type == "RESOURCE_STATE_CHANGED" for e in message.events):
        message = sim.handle_reply(_reply(message.now))
    assert message.now == pytest.approx(6.0)  # then 1 flop at 0.25 flop/s
    assert sim.power.switches.rows == [
        (pytest.approx(0.0, abs=1e-6), "0-1", -2), (pytest.approx(2.0), "0-1", 1), (pytest.approx(2.0), "0", -1),
        (pytest.approx(6.0), "0", 0),
    ]  # fmt: skip
