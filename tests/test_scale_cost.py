"""benchmarks/scale_cost.py's attribution (issue 29): timewarp's own CPU per pod is the
broker (its simulator thread included) plus the runtime's share of the scheduler process,
the scheduler program's is the rest, and the whole run is compared with the unpatched
scheduler's CPU. Figures from made-up runs: nothing here is timed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks import scale_cost
from experiments._common import Run


def _run(tmp_path: Path, runtime: dict[str, float] | None, total: float = 9.0) -> Run:
    processes = {
        name: {"requests": 1, "user_cpu_s": 1.0, "system_cpu_s": 0.1, "runtime_cpu_s": cpu}
        for name, cpu in (runtime or {}).items()
    }
    return Run(
        out=tmp_path,
        returncode=0,
        wall_s=12.5,
        manifest={"ok": True, "processes": processes},
        cpu_s={"broker": 4.0, "scheduler": 3.0},
        cpu_total_s=total,
        thread_cpu_s={"broker": {"python": 3.0, "timewarp-sim": 1.0}},
        peak_rss_kib={"broker": 2048, "scheduler": 1024},
    )


def test_runtime_share_is_summed_over_the_manifests_processes(tmp_path: Path) -> None:
    run = _run(tmp_path, {"scheduler-0": 0.25, "scheduler-1": 0.5})
    assert scale_cost.runtime_cpu_s(run.manifest) == pytest.approx(0.75)
    assert math.isnan(scale_cost.runtime_cpu_s({"processes": {"x": {"requests": 3}}}))
    assert math.isnan(scale_cost.runtime_cpu_s({}))


def test_timewarps_own_is_broker_simulator_and_runtime(tmp_path: Path) -> None:
    figures = scale_cost.split(_run(tmp_path, {"scheduler-0": 0.5}), pods=1000)
    assert figures["broker_rest"] == pytest.approx(3.0)  # ms per pod
    assert figures["sim"] == pytest.approx(1.0)
    assert figures["runtime"] == pytest.approx(0.5)
    assert figures["own"] == pytest.approx(4.5)
    assert figures["program"] == pytest.approx(2.5)  # the scheduler process minus the runtime
    assert figures["total"] == pytest.approx(9.0)
    assert math.isnan(figures["unpatched"]) and math.isnan(figures["ratio"])
    assert figures["rss_broker"] == 2


def test_a_hosted_simulator_has_no_thread_of_its_own(tmp_path: Path) -> None:
    """Since the embedded simulator runs in the driver's thread, its CPU is in the broker
    rest; the figures still add up (not NaN)."""
    run = _run(tmp_path, {"scheduler-0": 0.5})
    run.thread_cpu_s = {"broker": {"python": 4.0}}
    figures = scale_cost.split(run, pods=1000)
    assert figures["sim"] == 0 and figures["broker_rest"] == pytest.approx(4.0)
    assert figures["own"] == pytest.approx(4.5)


def test_the_ratio_is_the_whole_run_over_the_unpatched_scheduler(tmp_path: Path) -> None:
    unpatched = _run(tmp_path, None)
    unpatched.cpu_s = {"broker": 7.0, "scheduler": 6.0}
    figures = scale_cost.split(_run(tmp_path, {"s": 0.5}, total=9.0), 1000, unpatched)
    assert figures["unpatched"] == pytest.approx(6.0)
    assert figures["ratio"] == pytest.approx(1.5)


def test_a_run_without_the_runtimes_figures_shows_no_share(tmp_path: Path) -> None:
    figures = scale_cost.split(_run(tmp_path, None), pods=1000)
    assert math.isnan(figures["runtime"]) and math.isnan(figures["own"])
    row = scale_cost.table_row("1 × 10", 1, [figures])
    headers = dict(zip(scale_cost.HEADERS, row, strict=True))
    assert headers["CPU/pod runtime (ms)"] == "-"
    assert headers["CPU/pod broker rest (ms)"] == "3.00 / 3.00 / 3.00"


def test_unpatched_speed_spreads_the_pods_at_the_target_rate(tmp_path: Path) -> None:
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps({"jobs": [{"subtime": 0.0}, {"subtime": 1000.0}]}))
    rate = scale_cost.UNPATCHED_PODS_PER_S
    assert scale_cost.unpatched_speed(workload, 2) == pytest.approx(1000.0 * rate / 2)
    assert scale_cost.unpatched_speed(workload, 10**9) == 1.0  # never slower than real time
