"""Entropy from the run's seed (docs/clock.md, "What is deterministic"): every source a
program draws randomness from — ``random``, ``os.urandom``, ``secrets``, ``uuid``,
numpy, the hash seed — gives the same values on every run with the same seed, and other
values with another seed; schedulers written with them place the same pods on the same
nodes run after run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from simrun import run_simulate, run_twice

from patcher.launch import process_seed
from timewarp._core.entropy import Stream

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = "tests/programs/entropy"
PLATFORM = ROOT / "examples" / "inputs" / "cluster16.xml"


@given(
    seed=st.integers(0, 2**64 - 1),
    sizes=st.lists(st.integers(0, 100), max_size=8),
)
def test_a_stream_is_its_seed_and_label_whatever_the_reads(seed, sizes):
    whole = Stream(seed, "os").read(sum(sizes))
    pieces = Stream(seed, "os")
    assert b"".join(pieces.read(n) for n in sizes) == whole
    assert Stream(seed, "other").read(32) != Stream(seed, "os").read(32)
    assert Stream(seed + 1, "os").read(32) != Stream(seed, "os").read(32)


def test_a_process_seed_depends_on_the_run_seed_and_the_name():
    assert process_seed(0, "scheduler-0") == process_seed(0, "scheduler-0")
    seeds = {process_seed(s, n) for s in (0, 1) for n in ("scheduler-0", "scheduler-1")}
    assert len(seeds) == 4


def test_numpy_imported_before_the_seed_took_effect_is_reseeded(monkeypatch):
    """The adapter reseeds numpy's legacy global generator from the stream, whatever
    numpy seeded it with when it was imported."""
    import numpy as np

    from timewarp._core import entropy
    from timewarp._core.intercept import numpy as numpy_adapter

    draws = []
    for _ in range(2):
        np.random.seed(None)  # from the OS, as at import
        monkeypatch.setattr(entropy, "STREAM", Stream(5, "os"))
        numpy_adapter.MECHANISM.after_import["numpy.random"](np.random)
        draws.append(np.random.rand(3).tolist())
    assert draws[0] == draws[1]


def _sources(env, cache: Path, *extra: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "run", "--standalone", "-q", *extra, "--",
         "python", f"{PROGRAMS}/sources.py"],
        cwd=ROOT, env={**env, "XDG_CACHE_HOME": str(cache)}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_every_source_repeats_with_the_seed_and_changes_with_another(subprocess_env, tmp_path):
    # the first run fills the import hook's cache, the second finds it warm: the runtime's
    # own work (writing the cache) must not move the program's draws
    first = _sources(subprocess_env, tmp_path / "cache")
    assert _sources(subprocess_env, tmp_path / "cache") == first
    other = _sources(subprocess_env, tmp_path / "cache", "--seed", "7")
    assert len(first) == len(other) == 13
    for mine, theirs in zip(first, other, strict=True):
        assert mine != theirs, mine  # each source follows the seed (the set: its order)


SCHEDULERS = ("random_choice", "set_order", "uuid", "numpy")


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    """Nine one-core jobs of 60 s, six at t=0 and three at t=100, on 16 one-core nodes:
    every scheduler has a choice to make."""
    jobs = [
        {"id": str(i + 1), "subtime": 0 if i < 6 else 100, "res": 1, "walltime": 1000,
         "profile": "d"}
        for i in range(9)
    ]  # fmt: skip
    profile = {"type": "delay", "delay": 60, "cpu": "1", "scheduler": "default"}
    path = tmp_path_factory.mktemp("workload") / "w9.json"
    path.write_text(json.dumps({"nb_res": 1, "jobs": jobs, "profiles": {"d": profile}}))
    return path


@pytest.mark.parametrize("name", SCHEDULERS)
def test_a_scheduler_drawing_randomness_is_reproducible_and_follows_the_seed(
    name, workload, subprocess_env, tmp_path
):
    command = f"python {PROGRAMS}/{name}_scheduler.py"
    out, _ = run_twice(tmp_path, subprocess_env, command, PLATFORM, workload)
    log = (out / "scheduler-0.log").read_bytes()
    assert log == (tmp_path / "run2" / "scheduler-0.log").read_bytes()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 0
    assert manifest["figures"]["nondeterministic_advances"] == 0
    assert manifest["figures"]["nb_jobs_success"] == 9

    other = tmp_path / "seed1"
    proc = run_simulate(other, subprocess_env, command, PLATFORM, workload, "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((other / "manifest.json").read_text())["seed"] == 1
    assert (other / "scheduler-0.log").read_bytes() != log
    placements = (out / "out_jobs.csv").read_bytes()
    if name == "uuid":  # first fit in name order: only the names it makes change
        assert (other / "out_jobs.csv").read_bytes() == placements
    else:
        assert (other / "out_jobs.csv").read_bytes() != placements


def test_the_summary_and_the_manifest_name_the_seed(workload, subprocess_env, tmp_path):
    command = f"python {PROGRAMS}/random_choice_scheduler.py"
    proc = run_simulate(
        tmp_path, subprocess_env, command, PLATFORM, workload, "--seed", "42", quiet=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "seed (--seed" in proc.stderr and "42" in proc.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["seed"] == 42 and manifest["figures"]["seed"] == 42


def test_a_seed_that_is_not_an_integer_is_refused(subprocess_env, tmp_path, workload):
    proc = run_simulate(
        tmp_path, subprocess_env, "python x.py", PLATFORM, workload, "--seed", "abc"
    )
    assert proc.returncode == 2
    assert "--seed: expected an integer, got 'abc'" in proc.stderr
