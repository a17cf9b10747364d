"""The bundled sweeps under experiments/ are valid, and the Batkube figure helper draws."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from commands.sweeping.plan import plan_runs
from commands.sweeping.results import METRICS
from commands.sweeping.spec import load_sweep

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.yaml"))


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_bundled_sweep_files_load(path):
    sweep = load_sweep(path)
    assert sweep.points and sweep.root == ROOT


def test_batkube_sweep_puts_lockstep_timeouts_beside_deterministic_mode():
    sweep = load_sweep(ROOT / "experiments" / "batkube_timeout.yaml")
    modes = {p.factors["mode"] for p in sweep.points}
    assert modes == {"deterministic", "lockstep"}
    timeouts = {
        p.factors.get("timeout-value") for p in sweep.points if p.factors["mode"] == "lockstep"
    }
    assert "50ms" in timeouts and len(timeouts) >= 5


def test_kse_factorial_is_the_papers_96_scenarios_with_replicaset_pods(tmp_path):
    sweep = load_sweep(ROOT / "experiments" / "kse_factorial.yaml")
    arms = {(p.factors["scheduler"], p.factors.get("algorithm")) for p in sweep.points}
    assert arms == {("kube-scheduler", None), ("kse", "greedy"), ("kse", "refine")}
    assert len(sweep.points) == 96  # 32 per scheduler: pods, rate, shape, distribution, metric
    for factor in ("pods", "rate", "shape", "distribution", "metric"):
        assert len({p.factors[factor] for p in sweep.points}) == 2
    # one point's workload, generated as the sweep would: ReplicaSet pods plus the keeper
    del sweep.points[1:]
    run = plan_runs(sweep, tmp_path)[0]
    workload = json.loads(Path(run.simulate_argv[run.simulate_argv.index("-w") + 1]).read_text())
    movable = [j for j in workload["jobs"] if j.get("replicaset") == "app"]
    assert len(movable) == run.point.factors["pods"]
    assert len(workload["jobs"]) == len(movable) + 1  # the keeper, never moved


def write_summary(path: Path) -> None:
    cols = ["workload", "mode", "timeout-value", "n_ok"] + [
        f"{m}_{s}" for m in METRICS for s in ("mean", "sd", "ci95")
    ]
    rows = []
    for workload in ("burst", "spaced"):
        rows.append({"workload": workload, "mode": "deterministic", "timeout-value": "", "n_ok": 3})
        rows.append({"workload": workload, "mode": "lockstep", "timeout-value": "50ms", "n_ok": 5})
    for r in rows:
        for m in METRICS:
            r[f"{m}_mean"], r[f"{m}_sd"], r[f"{m}_ci95"] = 2000.0, 1.0, 2.0
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)


def test_batkube_figure_helper_draws_thesis_and_sweep(tmp_path, subprocess_env):
    results = tmp_path / "results"
    results.mkdir()
    write_summary(results / "summary.csv")
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    for name in ("timeout_200_delay170.csv", "timeout_spaced_200_delay170.csv"):
        (thesis / name).write_text(
            "timeout,duration,makespan,mean_waiting_time\n0,7.6,44793.9,11372.3\n50,38.5,2224.5,979.6\n"
        )
    script = ROOT / "experiments" / "batkube_timeout_figure.py"
    proc = subprocess.run(
        [sys.executable, str(script), str(results), "--batkube", str(thesis), "--table"],
        capture_output=True, text=True, env=subprocess_env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (results / "fig4.5.png").read_bytes()[:4] == b"\x89PNG"
    # the table: our lockstep level beside the thesis' run at the same timeout
    assert (
        "| burst | lockstep | 50ms | 5 | 2000.0 ± 1.0 | 2000.0 ± 1.0 |  | 2224 / 980 |"
        in proc.stdout
    )
    missing = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "nowhere")],
        capture_output=True, text=True, env=subprocess_env, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 2 and "run the sweep first" in missing.stderr
