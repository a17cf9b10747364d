"""experiments/autoscaling.py, one scenario with both autoscalers (slow: ~1 min)."""

from __future__ import annotations

import json

import pytest

from experiments import autoscaling


@pytest.mark.slow
def test_the_step_scenario_with_hpa_and_kpa(tmp_path) -> None:
    code = autoscaling.main(["--scenario", "step", "-o", str(tmp_path)])
    assert code == 0
    results = {r["autoscaler"]: r for r in json.loads((tmp_path / "results.json").read_text())}
    assert set(results) == {"hpa", "kpa"}
    hpa = results["hpa"]
    assert 20 <= min(hpa["steady_high"]) and max(hpa["steady_high"]) <= 25
    assert 300 <= hpa["scale_down_after_s"] <= 345
    assert results["kpa"]["time_to_scale_s"] < 300


def test_the_scenarios_figures_from_rows() -> None:
    rows = [
        {"time": str(15 * i), "ready_replicas": str(r), "request_rate": str(q),
         "failed_requests": str(f), "desired_replicas": str(r)}
        for i, (r, q, f) in enumerate([(1, 20, 0), (1, 200, 50), (20, 200, 0), (25, 20, 0)], 1)
    ]  # fmt: skip
    fig = autoscaling.figures(rows, "ramp")
    # need: 2, 20, 20, 2 → under at ticks 1-2 (30 s), over by 23 pods at the last (345 s)
    assert fig["time_to_scale_s"] == 30
    assert fig["overprovisioned_replica_s"] == 23 * 15
    assert fig["failed"] == 50


def test_the_steady_state_of_the_step_starts_after_the_stabilisation_window() -> None:
    """The HPA overshoots on the way up (the first pods saturated while new ones start)
    and holds that recommendation for its 300 s downscale window: the steady state is
    read after it, not from a fixed 600 s (which took the held overshoot for it)."""
    desired = {300: 3, 315: 3, 330: 6, 345: 12, 360: 22, 375: 30, 690: 25, 705: 21}
    rows, n = [], 2
    for i in range(1, 2400 // 15 + 1):
        t = 15 * i
        n = desired.get(t, n) if t <= 1500 else 2
        rate = 200 if 300 < t <= 1500 else 20
        rows.append({"time": str(t), "ready_replicas": str(n), "request_rate": str(rate),
                     "failed_requests": "0", "desired_replicas": str(n)})  # fmt: skip
    fig = autoscaling.figures(rows, "step")
    assert fig["steady_high"] == [21]
    assert fig["scale_down_after_s"] == 15


def test_the_sinusoid_is_checked_against_the_hpa_tolerance_band() -> None:
    # at 100/s the work is 10 pods at 50 %: the HPA keeps 9.09..11.1 → 9 to 12 pods
    assert [autoscaling.within_tolerance(100, n) for n in (8, 9, 12, 13)] == [
        False, True, True, False
    ]  # fmt: skip
    rows = [
        {"time": str(15 * i), "ready_replicas": str(r), "request_rate": str(q),
         "failed_requests": "0", "desired_replicas": str(r)}
        for i, (r, q) in enumerate([(9, 100), (13, 100), (10, 100), (2, 20)], 1)
    ]  # fmt: skip
    fig = autoscaling.figures(rows, "sinusoid")
    assert fig["in_band_share"] == 3 / 4
    assert fig["ready_minus_need"] == [-1, 3]
