"""The repository holds sources, not results: no run outputs committed, and the outputs
the docs' commands write from the checkout are ignored (issue 15 item 16)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OUTPUTS = [
    "out_events.csv",  # pybatsim writes it into its working directory
    "out_jobs.csv",  # `timewarp sim` with its default prefix
    "out/run1/out_jobs.csv",  # the user guide's `timewarp simulate -o out/run1`
    "results/smoke/runs.csv",  # `timewarp sweep ... -o results/smoke`
    "build/mysched.py",  # `timewarp patch ... -o build/`
]


def _git(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_no_run_output_is_committed():
    tracked = _git("ls-files").stdout.splitlines()
    assert not [p for p in tracked if Path(p).name.startswith("out_") and p.endswith(".csv")]


def test_the_outputs_of_the_documented_commands_are_ignored():
    proc = _git("check-ignore", "--no-index", *OUTPUTS)
    assert sorted(proc.stdout.split()) == sorted(OUTPUTS), proc.stderr
