"""`timewarp sim` on bad input: a message naming file and field, exit 2, no outputs — and
a decision process that breaks the rules: exit 1 with the rule named."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import zmq

from simulator.testing import free_endpoint, write_platform, write_workload

GOOD_JOBS = [{"id": 1, "subtime": 0, "res": 1, "profile": "d"}]
GOOD_PROFILES = {"d": {"type": "delay", "delay": 5}}


def _sim(env, *args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "sim", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def good(tmp_path):
    return (
        write_platform(tmp_path / "p.xml", 2),
        write_workload(tmp_path / "w.json", GOOD_JOBS, GOOD_PROFILES),
    )


def _bad_workload(tmp_path, name, jobs=None, profiles=None, raw=None):
    path = tmp_path / name
    if raw is not None:
        path.write_text(raw)
        return path
    return write_workload(path, jobs or GOOD_JOBS, profiles or GOOD_PROFILES)


CASES = {
    "malformed_json": (dict(raw='{"jobs": ['), "malformed JSON at line 1"),
    "unknown_profile_type": (
        dict(profiles={"d": {"type": "sleepy", "delay": 1}}),
        "profiles.d.type: unknown profile type 'sleepy'",
    ),
    "batsim_only_type": (
        dict(profiles={"d": {"type": "trace", "trace": "x.txt"}}),
        "'trace' is a Batsim profile type that timewarp sim does not model",
    ),
    "usage_trace": (
        dict(profiles={"d": {"type": "usage_trace", "trace": "ranks.txt"}}),
        "'usage_trace' is a Batsim profile type that timewarp sim does not model (per-rank "
        "traces of (usage, flops) steps",
    ),
    "duplicate_ids": (
        dict(jobs=[GOOD_JOBS[0], dict(GOOD_JOBS[0])]),
        "jobs[1].id: duplicate job id '1' (first at jobs[0])",
    ),
    "negative_subtime": (
        dict(jobs=[{**GOOD_JOBS[0], "subtime": -1}]),
        "jobs[0].subtime: expected a number >= 0, got -1",
    ),
    "negative_delay": (
        dict(profiles={"d": {"type": "delay", "delay": -3}}),
        "profiles.d.delay: expected a number >= 0, got -3",
    ),
    "too_many_resources": (
        dict(jobs=[{**GOOD_JOBS[0], "res": 3}]),
        "jobs[0].res: requests 3 resources but the platform has 2 compute resources",
    ),
    "undefined_profile": (
        dict(jobs=[{**GOOD_JOBS[0], "profile": "nope"}]),
        "jobs[0].profile: profile 'nope' is not defined",
    ),
    "bad_walltime": (
        dict(jobs=[{**GOOD_JOBS[0], "walltime": 0}]),
        "jobs[0].walltime: expected -1 or a number > 0",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_workload_is_named_with_file_and_field_and_nothing_is_written(
    case, tmp_path, good, subprocess_env
):
    kwargs, needle = CASES[case]
    workload = _bad_workload(tmp_path, f"{case}.json", **kwargs)
    prefix = tmp_path / "out" / "run"
    proc = _sim(subprocess_env, "-p", good[0], "-w", good[1], "-w", workload, "-e", prefix)
    assert proc.returncode == 2
    assert str(workload) in proc.stderr and needle in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "xml, needle",
    [
        ("<platform><host id='a'", "malformed XML"),
        (
            "<platform version='4.1'><zone id='z'><host id='a' speed='1Gf'/></zone></platform>",
            "no master host",
        ),
        (
            "<platform version='4.1'><host id='master_host' speed='fast'/></platform>",
            "speed 'fast' is not like '1Gf'",
        ),
    ],
)
def test_bad_platform_is_named(xml, needle, tmp_path, good, subprocess_env):
    platform = tmp_path / "bad.xml"
    platform.write_text(xml)
    proc = _sim(subprocess_env, "-p", platform, "-w", good[1], "-e", tmp_path / "x")
    assert proc.returncode == 2
    assert str(platform) in proc.stderr and needle in proc.stderr


def test_master_host_can_be_named_with_m(tmp_path, subprocess_env):
    platform = tmp_path / "p.xml"
    platform.write_text(
        "<platform version='4.1'><zone id='z'><host id='boss' speed='1Gf'/>"
        "<host id='n0' speed='1Gf'/></zone></platform>"
    )
    from simulator.platform import load_platform

    assert load_platform(platform, "boss").compute[0].name == "n0"


def test_energy_on_hosts_without_their_power_is_refused_with_a_reason(
    good, tmp_path, subprocess_env
):
    proc = _sim(subprocess_env, "-p", good[0], "-w", good[1], "-E")
    assert proc.returncode == 2 and "no wattage_per_state property" in proc.stderr


def _one_reply_process(endpoint, reply_text, result):
    context = zmq.Context()
    socket = context.socket(zmq.REP)
    socket.bind(endpoint)
    try:
        if socket.poll(30000):
            socket.recv()
            socket.send_string(reply_text)
            if socket.poll(30000):  # the run goes on: answer the job submission wrongly
                result["second"] = json.loads(socket.recv())
                socket.send_string(
                    json.dumps(
                        {"now": 0.5, "events": [{"timestamp": 0.5, "type": "CALL_ME_LATER",
                                                 "data": {"timestamp": 0.25}}]}
                    )
                )  # fmt: skip
    finally:
        socket.close(linger=0)
        context.term()


def test_decision_process_breaking_a_rule_stops_the_run_with_exit_1(good, tmp_path, subprocess_env):
    endpoint = free_endpoint()
    result: dict = {}
    thread = threading.Thread(
        target=_one_reply_process,
        args=(endpoint, '{"now": 0, "events": []}', result),
        daemon=True,
    )
    thread.start()
    prefix = tmp_path / "run"
    proc = _sim(subprocess_env, "-p", good[0], "-w", good[1], "-e", prefix, "-s", endpoint,
                "--reply-timeout", "20")  # fmt: skip
    thread.join(timeout=30)
    assert proc.returncode == 1
    assert "CALL_ME_LATER at 0.25 is not strictly after the current time 0.5" in proc.stderr
    assert result["second"]["events"][0]["type"] == "JOB_SUBMITTED"
    assert not list(tmp_path.glob("run_*"))


def test_silent_decision_process_hits_the_reply_timeout(good, tmp_path, subprocess_env):
    context = zmq.Context()
    socket = context.socket(zmq.REP)
    # a port the system picks as it binds (one found free first could be taken before)
    endpoint = f"tcp://127.0.0.1:{socket.bind_to_random_port('tcp://127.0.0.1')}"
    try:
        proc = _sim(subprocess_env, "-p", good[0], "-w", good[1], "-e", tmp_path / "r", "-s",
                    endpoint, "--reply-timeout", "0.5")  # fmt: skip
    finally:
        socket.close(linger=0)
        context.term()
    assert proc.returncode == 1 and "no reply from the decision process" in proc.stderr


def test_message_log_and_final_line(good, tmp_path, subprocess_env):
    from simulator.fcfs import serve

    endpoint = free_endpoint()
    thread = threading.Thread(target=serve, args=(endpoint,), daemon=True)
    thread.start()
    log = tmp_path / "messages.log"
    proc = _sim(subprocess_env, "-p", good[0], "-w", good[1], "-e", tmp_path / "r", "-s",
                endpoint, "--message-log", log, "--reply-timeout", "20")  # fmt: skip
    thread.join(timeout=20)
    assert proc.returncode == 0, proc.stderr
    lines = log.read_text().splitlines()
    assert lines[0].startswith('BATSIM -> SCHED: {"now":0.0,"events":[{"timestamp":0.0,')
    assert lines[-1].startswith("SCHED -> BATSIM: ")
    assert "SIMULATION_ENDS" in lines[-2]
    assert "timewarp sim: done at t=5 s simulated, 1 jobs" in proc.stderr


def test_progress_line_names_time_jobs_and_events(tmp_path):
    import io

    from simulator.runner import RunStats, print_progress
    from simulator.testing import make_sim

    platform, workload = (
        write_platform(tmp_path / "p.xml", 1),
        write_workload(tmp_path / "w.json", GOOD_JOBS, GOOD_PROFILES),
    )
    sim = make_sim(platform, [workload])
    stream = io.StringIO()
    print_progress(sim, RunStats(messages=3), stream)
    assert stream.getvalue() == (
        "timewarp sim: t=0.000 s simulated, 0/1 jobs ended, 3 messages, 0 events\n"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}", "JSON nested too deeply to read"),
        (None, "a device, not a workload file"),
    ],
    ids=["nested-100000", "dev-zero"],
)
def test_a_workload_that_cannot_be_read_is_exit_2_not_a_traceback(
    tmp_path, good, subprocess_env, text, needle
):
    """Issue 27 item 12: RecursionError for deep JSON; /dev/zero filled the memory."""
    workload = Path("/dev/zero")
    if text is not None:
        workload = tmp_path / "deep.json"
        workload.write_text(text)
    proc = _sim(subprocess_env, "-p", good[0], "-w", workload, "-e", tmp_path / "out" / "run")
    assert proc.returncode == 2, proc.stderr
    assert f"{workload}: {needle}" in proc.stderr and "Traceback" not in proc.stderr


def _answer_then_exit(endpoint: str) -> None:
    """A decision process that answers SIMULATION_BEGINS, then dies (its socket closed
    with the request of the next message unanswered)."""
    context = zmq.Context()
    socket = context.socket(zmq.REP)
    socket.bind(endpoint)
    try:
        if socket.poll(30000):
            socket.recv()
            socket.send_string('{"now": 0, "events": []}')
            socket.poll(30000)  # the next message came: die without answering
    finally:
        socket.close(linger=0)
        context.term()


def test_a_decision_process_that_disconnects_ends_the_run_with_partial_outputs(
    good, tmp_path, subprocess_env
):
    """Without --reply-timeout Batsim would wait forever; the socket monitor sees the
    connection go and the run ends (exit 1) with the reason and partial outputs."""
    endpoint = free_endpoint()
    thread = threading.Thread(target=_answer_then_exit, args=(endpoint,), daemon=True)
    thread.start()
    prefix = tmp_path / "run"
    proc = _sim(subprocess_env, "-p", good[0], "-w", good[1], "-e", prefix, "-s", endpoint)
    thread.join(timeout=30)
    assert proc.returncode == 1, proc.stderr
    assert f"the decision process at {endpoint} disconnected" in proc.stderr
    assert "partial outputs written (0 of" in proc.stderr
    assert (tmp_path / "run_jobs.csv").exists()
