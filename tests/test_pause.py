"""`timewarp simulate --pause-at T`: the cluster holds still at T, the API answers, and
`timewarp resume OUT` lets it go on — with the same bytes as a run that never paused
(commands/pausing.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from simrun import ROOT, run_simulate

from commands.pausing import PAUSED_FILE, parse_condition, resume
from commands.simulate import sim_duration

EXAMPLES = ROOT / "examples" / "inputs"
DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"
COMPARED = ("out_jobs.csv", "out_schedule.csv", "out_machine_states.csv", "scheduler-0.log")


def _wait_for(predicate, what: str, bound_s: float = 120.0) -> None:
    tick = threading.Event()
    for _ in range(int(bound_s / 0.05)):
        if predicate():
            return
        tick.wait(0.05)
    raise AssertionError(f"{what} did not happen within {bound_s:g} s")


def _pods(kubeconfig: Path) -> tuple[str, dict[str, int]]:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
    pods = api.list_namespaced_pod("default")
    phases: dict[str, int] = {}
    for pod in pods.items:
        phases[pod.status.phase] = phases.get(pod.status.phase, 0) + 1
    return pods.metadata.resource_version, phases


def test_a_paused_run_answers_holds_still_and_resumes_to_the_same_bytes(tmp_path, subprocess_env):
    plain = tmp_path / "plain"
    r = run_simulate(
        plain, subprocess_env, DEFAULT_LIKE, EXAMPLES / "cluster16.xml",
        EXAMPLES / "burst_40_delay170.json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]

    out = tmp_path / "paused"
    kubeconfig = tmp_path / "look.kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
         "--scheduler", DEFAULT_LIKE, "-p", str(EXAMPLES / "cluster16.xml"),
         "-w", str(EXAMPLES / "burst_40_delay170.json"), "-o", str(out),
         "--pause-at", "100", "--pause-at", "3m", "--write-kubeconfig", str(kubeconfig)],
        cwd=ROOT, env=subprocess_env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        note_path = out / PAUSED_FILE
        _wait_for(note_path.exists, "the pause at t=100")
        note = json.loads(note_path.read_text())
        assert note["t_s"] == 100.0 and note["reason"] == "--pause-at 100"
        version, phases = _pods(kubeconfig)
        # t=100 s of a burst of 40 jobs of 170 s on 16 one-core nodes: 16 run, 24 wait
        assert phases == {"Running": 16, "Pending": 24}
        assert _pods(kubeconfig) == (version, phases)  # nothing moves while paused
        assert "resumed the run paused at simulated t=100.000 s" in resume(out)
        _wait_for(lambda: note_path.exists() and "180" in note_path.read_text(), "t=180")
        _, phases = _pods(kubeconfig)
        assert phases == {"Succeeded": 16, "Running": 16, "Pending": 8}
        r = subprocess.run(
            [sys.executable, "-m", "timewarp", "resume", str(out)],
            cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err[-3000:]
    assert "PAUSED at simulated t=100.000 s (--pause-at 100)" in err
    assert f"KUBECONFIG={kubeconfig} kubectl get pods -o wide" in err
    for name in COMPARED:
        assert (out / name).read_bytes() == (plain / name).read_bytes(), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert [p["t_s"] for p in manifest["pauses"]] == [100.0, 180.0]
    assert not (out / PAUSED_FILE).exists()


def test_resume_without_a_paused_run_says_so(tmp_path, subprocess_env):
    r = subprocess.run(
        [sys.executable, "-m", "timewarp", "resume", str(tmp_path)],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2
    assert f"{tmp_path}: no paused run there (no paused.json)" in r.stderr


@pytest.mark.parametrize(
    ("text", "kind", "threshold"),
    [("refused", "refused", 0.0), ("pending>10m", "pending", 600.0),
     ("failed-rate>0.05", "failed-rate", 0.05)],
)  # fmt: skip
def test_pause_conditions_parse(text, kind, threshold):
    condition = parse_condition(text, sim_duration)
    assert (condition.kind, condition.threshold) == (kind, threshold)


@pytest.mark.parametrize("text", ["pending", "failed-rate>2", "slow>3", "pending>soon"])
def test_a_bad_pause_condition_is_exit_2_naming_it(tmp_path, subprocess_env, text):
    r = run_simulate(
        tmp_path / "out", subprocess_env, DEFAULT_LIKE, EXAMPLES / "cluster16.xml",
        EXAMPLES / "burst_40_delay170.json", "--pause-on", text,
    )  # fmt: skip
    assert r.returncode == 2
    assert f"--pause-on {text!r}:" in r.stderr
    assert not Path(tmp_path / "out" / "manifest.json").exists()


def test_pause_on_a_long_pending_pod_stops_at_the_first_step_past_it(tmp_path, subprocess_env):
    """Pods of the burst wait from t=0; the first broker step past 2 min is t=170 s, when
    the first jobs end: the run pauses there, once, and goes on to the usual end."""
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
         "--scheduler", DEFAULT_LIKE, "-p", str(EXAMPLES / "cluster16.xml"),
         "-w", str(EXAMPLES / "burst_40_delay170.json"), "-o", str(out),
         "--pause-on", "pending>2m"],
        cwd=ROOT, env=subprocess_env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        _wait_for((out / PAUSED_FILE).exists, "the pause")
        note = json.loads((out / PAUSED_FILE).read_text())
        assert note["t_s"] == 170.0
        assert note["reason"] == "--pause-on pending>2m: a pod pending for 170 s"
        resume(out)
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err[-3000:]
    assert err.count("PAUSED at") == 1
    assert json.loads((out / "manifest.json").read_text())["outputs"] == "complete"
