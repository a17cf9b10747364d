"""A sweep that knows services: two autoscaler settings on a generated service with a
flash crowd, two replicates each, and a broken point — service figures in runs.csv and
summary.csv, plots apart for run costs, and the compare report of the grid (--report)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

SPEC = {
    "name": "autoscalers",
    "root": str(ROOT),
    "replicates": 2,
    "base_seed": 1,
    "timeout": 200,
    "simulate_args": ["--stall-timeout", "60"],
    "schedulers": {
        "hpa-15s": ["python -m sample_schedulers.default_like",
                    "python -m sample_schedulers.hpa --sync-period 15"],
        "hpa-60s": ["python -m sample_schedulers.default_like",
                    "python -m sample_schedulers.hpa --sync-period 60"],
        "broken": "python -c \"raise SystemExit('deliberately broken')\"",
    },
    "platforms": {"p8": "examples/inputs/service_step/platform.xml"},
    "workloads": {
        "flash": {"generator": "service", "pattern": "constant", "low": 10, "duration": 1200,
                  "flash": "300:300:6", "cpu": "1", "hpa-target": 60, "max-replicas": 8},
    },
    "modes": {"deterministic": {}},
}  # fmt: skip


def test_a_sweep_of_autoscalers_has_service_columns_plots_and_a_report(tmp_path, subprocess_env):
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "sweep", spec, "-o", out, "--workers", "2",
         "--report", "-q"],
        capture_output=True, text=True, env=subprocess_env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # the broken point failed, the others ran
    runs = list(csv.DictReader(open(out / "runs.csv")))
    ok = [r for r in runs if r["status"] == "ok"]
    assert len(ok) == 4
    assert all(float(r["web.requests"]) > 20000 and r["web.replica_hours"] for r in ok)
    header = list(runs[0])
    assert header.index("web.replica_hours") < header.index("wall_s")  # results, then costs
    summary = {r["scheduler"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    # a slower HPA fails more requests in the flash crowd, with less replica-hours
    fast, slow = summary["hpa-15s"], summary["hpa-60s"]
    assert float(fast["web.failed_mean"]) < float(slow["web.failed_mean"])
    assert float(fast["web.replica_hours_mean"]) > float(slow["web.replica_hours_mean"])
    assert summary["broken"]["n_ok"] == "0" and summary["broken"]["web.failed_mean"] == ""
    assert sorted(p.name for p in (out / "plots").iterdir()) == [
        "scheduler-cost.png", "scheduler.png"
    ]  # fmt: skip
    page = (out / "report.html").read_text()
    assert "<th>scheduler=hpa-15s (2 runs)</th>" in page and "hpa-60s (2 runs)" in page
    assert "every run failed: scheduler=broken" in page
    assert "the same in every column" in page  # the same workloads (seeds 1, 2) per column
