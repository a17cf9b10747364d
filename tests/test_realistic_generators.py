"""`timewarp workload service` (daily/weekly patterns, flash crowds, a replayed rate) and
`timewarp workload batch` (mixed sizes, a daily arrival cycle, GPU requests)."""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from simulator import batch_gen, service_gen
from simulator.workload import load_workload

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = ROOT / "examples/inputs/service_step/platform.xml"


def _tool(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "workload", *map(str, args)],
        env=env, capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip


def _series(**kw):
    base = dict(pattern="daily", duration=86400, step=600, low=10, peak=100)
    return service_gen.rate_series(**{**base, **kw})


def test_the_daily_pattern_has_its_trough_at_night_and_peaks_at_11_and_20():
    series = _series()
    rates = {t: r for t, r in series}
    low_t = min(rates, key=rates.get)
    high_t = max(rates, key=rates.get)
    assert 3 * 3600 <= low_t <= 5 * 3600 and 19 * 3600 <= high_t <= 21 * 3600
    assert min(rates.values()) == pytest.approx(10, abs=0.2)
    assert max(rates.values()) == pytest.approx(100, abs=0.5)
    morning = max(r for t, r in series if 9 * 3600 <= t <= 13 * 3600)
    noon_dip = rates[15 * 3600]
    assert noon_dip < morning < max(rates.values())


def test_the_weekly_pattern_lowers_weekends_only():
    week = service_gen.rate_series(
        pattern="weekly", duration=7 * 86400, step=3600, low=10, peak=100, weekend=0.5
    )
    day = {t: r for t, r in week}
    for hour in range(24):
        assert day[5 * 86400 + hour * 3600] == pytest.approx(0.5 * day[hour * 3600], abs=0.002)
        assert day[2 * 86400 + hour * 3600] == day[hour * 3600]


def test_a_flash_crowd_multiplies_exactly_its_window_with_its_own_edges():
    plain = dict(_series(pattern="constant", duration=3600, step=600))
    flashed = dict(
        _series(
            pattern="constant", duration=3600, step=600, flashes=(service_gen.Flash(1000, 500, 4),)
        )  # fmt: skip
    )
    assert sorted(flashed) == [0, 600, 1000, 1200, 1500, 1800, 2400, 3000]
    assert flashed[1000] == flashed[1200] == 40 and flashed[1500] == 10 and flashed[600] == 10
    assert set(plain) < set(flashed)


def test_a_replayed_rate_csv_is_the_series(tmp_path, subprocess_env):
    rates = tmp_path / "rates.csv"
    rates.write_text("time,rate\n0,5\n100,20.5\n250,7\n")
    out = _tool(subprocess_env, "service", "--rate-csv", rates, "--duration", "400",
                "--flash", "120:30:2", "-o", tmp_path / "w.json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    steps = json.loads((tmp_path / "w.json").read_text())["services"][0]["traffic"]["steps"]
    assert steps == [[0, 5], [100, 20.5], [120, 41], [150, 20.5], [250, 7]]


def test_generated_service_files_are_seeded_and_load(tmp_path, subprocess_env):
    args = ["service", "--pattern", "weekly", "--duration", "604800", "--step", "3600",
            "--noise", "0.1", "--hpa-target", "60", "--seed", "3"]  # fmt: skip
    for n in (1, 2):
        assert _tool(subprocess_env, *args, "-o", tmp_path / f"{n}.json").returncode == 0
    assert (tmp_path / "1.json").read_bytes() == (tmp_path / "2.json").read_bytes()
    workload = load_workload(tmp_path / "1.json", "w0", 8)
    assert workload is not None
    other = _tool(subprocess_env, *args[:-1], "4", "-o", tmp_path / "3.json")
    assert other.returncode == 0
    assert (tmp_path / "3.json").read_bytes() != (tmp_path / "1.json").read_bytes()


@pytest.mark.parametrize(
    "args, message",
    [
        (["service", "--flash", "1:2"], "AT:DURATION:FACTOR"),
        (["service", "--min-replicas", "5", "--max-replicas", "2"], "--min-replicas is above"),
        (["batch", "-n", "3", "--rate", "1", "--mean-delay", "1", "--seed", "1",
          "--size", "x:cpu=1"], "the weight 'x' is not a number"),
        (["batch", "-n", "3", "--rate", "1", "--mean-delay", "1", "--seed", "1",
          "--size", "cpu=1", "--cpu-lognormal", "1:1"], "not both"),
        (["batch", "-n", "3", "--rate", "1", "--mean-delay", "1", "--seed", "1",
          "--size", "cpu=abc"], "requests.cpu"),
    ],
)  # fmt: skip
def test_bad_generator_flags_exit_2(tmp_path, subprocess_env, args, message):
    out = _tool(subprocess_env, *args, "-o", tmp_path / "w.json")
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert not (tmp_path / "w.json").exists()


def test_batch_sizes_follow_their_weights_and_gpus_their_share():
    workload = batch_gen.batch(
        4000, 0.1, 600, seed=1, gpu_fraction=0.25, gpus=2,
        sizes=[batch_gen.parse_size("3:cpu=500m,memory=1Gi"), batch_gen.parse_size("cpu=4")],
    )  # fmt: skip
    requests = [workload["profiles"][j["profile"]]["requests"] for j in workload["jobs"]]
    cpus = Counter(r["cpu"] for r in requests)
    assert 0.72 < cpus["500m"] / 4000 < 0.78
    gpus = [r.get("nvidia.com/gpu") for r in requests]
    assert set(gpus) == {None, "2"} and 0.22 < gpus.count("2") / 4000 < 0.28


def test_batch_cpu_lognormal_has_its_mean():
    workload = batch_gen.batch(3000, 0.1, 600, seed=2, cpu_lognormal=(2.0, 0.8))
    milli = [
        int(workload["profiles"][j["profile"]]["requests"]["cpu"][:-1]) for j in workload["jobs"]
    ]
    assert statistics.mean(milli) == pytest.approx(2000, rel=0.06)
    assert len(set(milli)) > 20 and min(milli) >= 100


def test_a_daily_cycle_brings_the_jobs_in_the_afternoon():
    workload = batch_gen.batch(5000, 0.02, 600, seed=3, cycle=0.9)
    hours = Counter(int(j["subtime"] % 86400 // 3600) for j in workload["jobs"])
    afternoon = sum(hours[h] for h in range(12, 17))
    night = sum(hours[h] for h in (0, 1, 2, 3, 4))
    assert afternoon > 5 * night
    flat = batch_gen.batch(5000, 0.02, 600, seed=3)
    hours = Counter(int(j["subtime"] % 86400 // 3600) for j in flat["jobs"])
    assert 0.6 < sum(hours[h] for h in range(12, 17)) / sum(hours[h] for h in range(5)) < 1.6


def test_a_flash_crowd_scales_a_generated_service_up(tmp_path, subprocess_env):
    out = _tool(subprocess_env, "service", "--pattern", "constant", "--low", "10",
                "--duration", "1500", "--flash", "300:600:8", "--cpu", "1",
                "--hpa-target", "60", "--max-replicas", "8", "-o", tmp_path / "w.json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    run = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
         "--scheduler", "python -m sample_schedulers.default_like",
         "--scheduler", "python -m sample_schedulers.hpa",
         "-p", PLATFORM, "-w", tmp_path / "w.json", "-o", tmp_path / "out"],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "out/out_services.csv")))
    before = max(int(r["desired_replicas"]) for r in rows if float(r["time"]) <= 300)
    during = max(int(r["desired_replicas"]) for r in rows if 300 < float(r["time"]) <= 900)
    assert before == 1 and during >= 4
