"""Issue 31: a study over seeds. A real sweep of two schedulers × three seeds — one picks
nodes with ``random.choice`` (its results move with the seed), one is deterministic —
then ``timewarp compare RESULTS``: per configuration the mean and the spread over seeds
in summary.csv, the terminal table and the HTML report (drawn by headless Chromium)."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import yaml
from browser import dump_dom, screenshot

from simulator.testing import write_platform, write_workload

ROOT = Path(__file__).resolve().parent.parent
SEEDS = [1, 2, 3, 4]


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    """4 nodes of 2 cores; 4 one-core jobs at 0 s, 2 two-core jobs at 1 s (100 s each).
    Spread the small ones (as least-allocated scoring does) and the big ones wait for
    them; stack them and the big ones start at once: where random.choice puts them
    decides."""
    platform = write_platform(tmp_path / "p.xml", 4, cores=2)
    profiles = {
        "small": {"type": "delay", "delay": 100, "cpu": "1", "scheduler": "default"},
        "big": {"type": "delay", "delay": 100, "cpu": "2", "scheduler": "default"},
    }
    jobs = [{"id": str(i), "subtime": 0, "res": 1, "profile": "small"} for i in range(1, 5)]
    jobs += [{"id": str(i), "subtime": 1, "res": 1, "profile": "big"} for i in (5, 6)]
    return platform, write_workload(tmp_path / "w.json", jobs, profiles)


def _sweep(tmp_path: Path, env: dict) -> Path:
    platform, workload = _inputs(tmp_path)
    spec = {
        "name": "seeds",
        "root": str(ROOT),
        "seeds": SEEDS,
        "timeout": 300,
        "schedulers": {
            "random": "python tests/programs/entropy/random_choice_scheduler.py",
            "spread": "python -m sample_schedulers.default_like --scheduler-name default",
        },
        "platforms": {"p4": str(platform)},
        "workloads": {"w": str(workload)},
        "modes": {"deterministic": {}},
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "sweep", tmp_path / "sweep.yaml", "-o", out,
         "--workers", "2", "--report", "-q", "--no-plots"],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_a_sweep_over_seeds_is_compared_with_its_spread(tmp_path, subprocess_env):
    out = _sweep(tmp_path, subprocess_env)
    runs = list(csv.DictReader(open(out / "runs.csv")))
    waits = {}
    for r in runs:
        waits.setdefault(r["scheduler"], []).append(float(r["mean_waiting_time"]))
    assert len(set(waits["spread"])) == 1  # deterministic whatever the seed
    assert len(set(waits["random"])) > 1, waits  # the seed moves random.choice
    summary = {r["scheduler"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    rnd = summary["random"]
    assert rnd["seeds"] == " ".join(map(str, SEEDS)) and rnd["mean_waiting_time_n"] == "4"
    assert float(rnd["mean_waiting_time_min"]) == min(waits["random"])
    assert float(rnd["mean_waiting_time_max"]) == max(waits["random"])
    assert float(rnd["mean_waiting_time_sd"]) > 0

    # the terminal table: a column per point over its seeds, mean ± σ [lowest–highest]
    page = tmp_path / "compare.html"
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "compare", out, "--html", page],
        capture_output=True, text=True, env=subprocess_env, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout
    assert "scheduler=random (4 runs)" in table and "scheduler=spread (4 runs)" in table
    line = next(x for x in table.splitlines() if "waiting time mean (s)" in x)
    lo, hi = min(waits["random"]), max(waits["random"])
    assert re.search(rf"± [\d.]+ \[{lo:,.1f}–{hi:,.1f}\]", line), line
    assert f"{waits['spread'][0]:,.1f} (×4)" in line, line
    assert "★" in line  # one of them is better on it, marked
    assert "seeds: the same in every column (4 per column)" in table
    assert "within the spread" in table  # the legend says what (★) means

    # the HTML report: the same cells, and the spread over seeds drawn
    dom = dump_dom(page, tmp_path)
    images = int(dom.split('data-images="')[1].split('"')[0])
    assert f'data-images-decoded="{images}"' in dom
    assert 'alt="Spread over seeds"' in dom
    assert re.search(rf"± [\d.]+ \[{lo:,.1f}–{hi:,.1f}\]", dom)
    assert 'class="best' in dom
    shot = screenshot(page, tmp_path / "shot.png", tmp_path)
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=int)
    blue = int((np.abs(pixels - np.array((0x1F, 0x77, 0xB4))).max(axis=2) <= 12).sum())
    assert blue > 500  # the plots are drawn, not blank
    # the sweep's own report is the same comparison
    assert "scheduler=random (4 runs)" in (out / "report.html").read_text()
