"""`timewarp simulate` with an operator process that drives a Deployment through the scale
subresource (tests/programs/scaling_operator.py, the official client, ``time.sleep``) and
``default_like`` scheduling its pods: deterministic, the same with both client
generations, and the same with real Batsim."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OLD_CLIENT = ROOT / ".venv" / "k8s24"
BATSIM = ROOT.parent / "shared" / "tools" / "batsim-4.2.1" / "bin" / "batsim"
PLATFORM = (
    ROOT.parent
    / "shared"
    / "data"
    / "batsim-reference"
    / "platforms"
    / "platform_graphene_16nodes_fixed.xml"
)
SCHEDULER = "python -m sample_schedulers.default_like --scheduler-name default"
OPERATOR = "python tests/programs/scaling_operator.py --until 200 --start-delay 5"
CSVS = ("out_jobs.csv", "out_schedule.csv", "out_machine_states.csv")


def _simulate(tmp_path: Path, name: str, env: dict, *extra: str) -> Path:
    if not PLATFORM.is_file():
        pytest.skip("../shared/data is not beside this checkout")
    workload = tmp_path / "w.json"
    workload.write_text(
        json.dumps(
            {
                "nb_res": 16,
                "jobs": [{"id": "1", "subtime": 0, "res": 1, "profile": "short"}],
                "profiles": {
                    "short": {"type": "delay", "delay": 10, "cpu": "1", "scheduler": "default"}
                },
            }
        )
    )
    out = tmp_path / name
    proc = subprocess.run(
        [
            sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
            "--scheduler", SCHEDULER, "--scheduler", OPERATOR,
            "-p", str(PLATFORM), "-w", str(workload), "-o", str(out), *extra,
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _operator_rounds(out: Path) -> list[dict]:
    lines = (out / "scheduler-1.log").read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def _k8s_rows(out: Path) -> list[list[str]]:
    rows = [line.split(",") for line in (out / "out_jobs.csv").read_text().splitlines()[1:]]
    return sorted(r for r in rows if r[1] == "k8s")


@pytest.fixture(scope="module")
def newest_runs(tmp_path_factory, subprocess_env):
    tmp = tmp_path_factory.mktemp("operator")
    return [_simulate(tmp, name, subprocess_env) for name in ("a", "b")]


def test_an_operator_scales_a_deployment_in_virtual_time_twice_identically(newest_runs):
    first, second = newest_runs
    for name in CSVS:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    rounds = _operator_rounds(first)
    assert rounds == _operator_rounds(second)
    by_t = {r["t"]: r for r in rounds[1:]}
    # t=0: the first pod is still starting (5 s); t=15: Ready, available
    assert (by_t[0.0]["replicas"], by_t[0.0]["ready"]) == (1, None)
    assert (by_t[15.0]["ready"], by_t[15.0]["available"]) == (1, 1)
    assert ["Available", "True", "MinimumReplicasAvailable"] in by_t[15.0]["conditions"]
    # t=30: scaled to 3 through the scale subresource; the new pods start at 35
    assert by_t[30.0]["scale"] == [3, 1, "app=web"] and by_t[30.0]["generation"] == [2, 2]
    assert (by_t[45.0]["ready"], by_t[45.0]["available"]) == (3, 3)
    # t=90: back to 1; t=120: a new image rolls out (revision 2)
    assert by_t[105.0]["replicas"] == 1
    assert by_t[135.0]["revision"] == "2" and by_t[135.0]["updated"] == 1
    rows = _k8s_rows(first)
    # every pod of the service is a Batsim job: they run from their start to the end of
    # the service (t=200) or until scaled away or replaced
    spans = sorted((float(r[8]), float(r[10]), r[7]) for r in rows)
    assert spans == [
        (5.0, 125.0, "COMPLETED_KILLED"),  # replaced by the rollout once the new pod is up
        (35.0, 90.0, "COMPLETED_KILLED"),
        (35.0, 90.0, "COMPLETED_KILLED"),
        (125.0, 200.0, "COMPLETED_SUCCESSFULLY"),
    ]
    schedule = (first / "out_schedule.csv").read_text().splitlines()
    assert (
        dict(zip(*(line.split(",") for line in schedule), strict=True))["makespan"] == "200.000000"
    )


def test_the_old_client_generation_gives_the_same_simulation(newest_runs, tmp_path, subprocess_env):
    if not (OLD_CLIENT / "kubernetes" / "__init__.py").exists():
        pytest.skip("kubernetes 24.2.0 is not installed in .venv/k8s24")
    env = {
        **subprocess_env,
        "PYTHONPATH": os.pathsep.join([str(OLD_CLIENT), subprocess_env["PYTHONPATH"]]),
    }
    old = _simulate(tmp_path, "old", env)
    rounds = _operator_rounds(old)
    assert rounds[0]["client"].startswith("24.")
    assert rounds[1:] == _operator_rounds(newest_runs[0])[1:]
    for name in CSVS:
        assert (old / name).read_bytes() == (newest_runs[0] / name).read_bytes(), name


def _batsim_runs() -> bool:
    try:
        return (
            subprocess.run([str(BATSIM), "--version"], capture_output=True, timeout=30).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_real_batsim_runs_the_services_pods_as_dynamic_jobs(newest_runs, tmp_path, subprocess_env):
    if not _batsim_runs():
        pytest.skip("real Batsim 4.2.1 cannot run here (see its README for the packages)")
    real = _simulate(tmp_path, "batsim", subprocess_env, "--batsim", str(BATSIM))
    assert _k8s_rows(real) == _k8s_rows(newest_runs[0])
    assert (real / "out_jobs.csv").read_text() == (newest_runs[0] / "out_jobs.csv").read_text()
