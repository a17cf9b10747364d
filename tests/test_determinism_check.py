"""`timewarp simulate --check-determinism`: two runs, every output and every log compared
byte for byte, the first differing line named (commands/determinism_check.py)."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from simrun import ROOT

from commands.determinism_check import (
    DIFFERENT_EXIT,
    FIRST_RUN_DIR,
    KEPT_FIRST_RUN_DIR,
    compare,
    run_twice,
)
from commands.stopping import Interrupted
from simulator.testing import write_platform, write_workload

DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    platform = write_platform(tmp_path / "p.xml", 4, cores=2)
    profile = {"type": "delay", "delay": 30, "cpu": "1", "scheduler": "default"}
    jobs = [{"id": str(i), "subtime": 5 * i, "res": 1, "profile": "d"} for i in range(8)]
    return platform, write_workload(tmp_path / "w.json", jobs, {"d": profile})


def _check(tmp_path: Path, env: dict, scheduler: str) -> subprocess.CompletedProcess:
    platform, workload = _inputs(tmp_path)
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
         "--check-determinism", "--scheduler", scheduler, "-p", str(platform),
         "-w", str(workload), "-o", str(tmp_path / "out")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def _folder(path: Path, files: dict[str, str]) -> Path:
    path.mkdir()
    for name, text in files.items():
        (path / name).write_text(text)
    return path


def test_identical_folders_have_no_difference(tmp_path):
    files = {"out_jobs.csv": "a\nb\n", "scheduler-0.log": "x\n"}
    assert compare(_folder(tmp_path / "a", files), _folder(tmp_path / "b", files)) == (2, [])


def test_the_first_differing_line_of_the_first_differing_file_is_named(tmp_path):
    a = _folder(tmp_path / "a", {"out_jobs.csv": "h\n1,0\n2,5\n", "z.log": "same\n"})
    b = _folder(tmp_path / "b", {"out_jobs.csv": "h\n1,0\n2,6\n", "z.log": "other\n"})
    compared, differences = compare(a, b)
    assert compared == 2
    assert [(d.file, d.line, d.first, d.second) for d in differences] == [
        ("out_jobs.csv", 3, "2,5", "2,6"),
        ("z.log", 1, "same", "other"),
    ]
    shorter = _folder(tmp_path / "c", {"out_jobs.csv": "h\n1,0\n", "z.log": "same\n"})
    (difference,) = compare(a, shorter)[1]
    assert (difference.line, difference.first, difference.second) == (3, "2,5", "(end of file)")


def test_wall_times_and_kubeconfigs_are_not_results_but_a_figure_is(tmp_path):
    def manifest(wall: float, makespan: float, out: Path) -> str:
        return json.dumps(
            {"wall_s": wall, "arguments": ["-o", str(out)],
             "figures": {"wall_s": wall, "speedup": 600 / wall, "makespan": makespan,
                         "traffic_model_cpu_s": wall / 2}}
        )  # fmt: skip

    a, b = tmp_path / "a", tmp_path / "b"
    _folder(a, {"manifest.json": manifest(1.2, 510, a), "s.kubeconfig": "port: 1"})
    _folder(b, {"manifest.json": manifest(1.9, 510, b), "s.kubeconfig": "port: 2"})
    assert compare(a, b) == (1, [])
    (b / "manifest.json").write_text(manifest(1.9, 511, b))
    (difference,) = compare(a, b)[1]
    assert difference.file == "manifest.json" and "510" in difference.first


def test_a_file_only_one_run_wrote_is_a_difference(tmp_path):
    a = _folder(tmp_path / "a", {"out_jobs.csv": "h\n", "extra.log": "x\n"})
    b = _folder(tmp_path / "b", {"out_jobs.csv": "h\n"})
    (difference,) = compare(a, b)[1]
    assert difference.file == "extra.log" and "first run only" in str(difference)


def test_a_deterministic_scheduler_passes_and_leaves_one_run_behind(tmp_path, subprocess_env):
    r = _check(tmp_path, subprocess_env, DEFAULT_LIKE)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "the two runs wrote the same bytes" in r.stderr
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
    assert (out / "out_jobs.csv").read_text().count("\n") == 9  # header + 8 jobs


def test_a_program_whose_log_changes_between_runs_fails_the_check(tmp_path, subprocess_env):
    # a scheduler that logs something outside the simulation's control (its process id)
    prog = tmp_path / "pid_scheduler.py"
    prog.write_text(
        "import os, runpy, sys\n"
        "print('started as pid', os.getpid(), flush=True)\n"
        "sys.argv = ['default_like', '--scheduler-name', 'default']\n"
        "runpy.run_module('sample_schedulers.default_like', run_name='__main__')\n"
    )
    r = _check(tmp_path, subprocess_env, f"python {prog}")
    assert r.returncode == DIFFERENT_EXIT, r.stderr[-3000:]
    assert "determinism check FAILED" in r.stderr
    assert "scheduler-0.log, line 1:" in r.stderr and "started as pid" in r.stderr
    kept = tmp_path / "out" / KEPT_FIRST_RUN_DIR
    assert (kept / "out_jobs.csv").read_bytes() == (tmp_path / "out" / "out_jobs.csv").read_bytes()


class _Runs:
    """``run_into`` for :func:`run_twice` without a simulation: each run writes one file
    into its folder, then ends as told (an exit status, or an exception raised)."""

    def __init__(self, *ends: int | BaseException) -> None:
        self.ends = list(ends)
        self.folders: list[Path] = []

    def __call__(self, folder: Path) -> int:
        self.folders.append(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "out_jobs.csv").write_text("h\n1\n")
        end = self.ends.pop(0)
        if isinstance(end, BaseException):
            raise end
        return end


@pytest.mark.parametrize(
    ("ends", "status", "kept"),
    [
        ((0, 0), 0, False),  # agreement
        ((1,), 1, True),  # the first run failed by itself: kept, for its manifest
        ((0, 4), 4, True),  # the second failed: the first (good) run kept beside it
        ((130,), 130, False),  # the first run stopped by Ctrl-C
        ((0, 143), 143, False),  # the second stopped by SIGTERM
        ((0, Interrupted(signal.SIGHUP)), None, False),  # a signal as the second begins
        ((0, RuntimeError("a bug")), None, False),
    ],
)
def test_the_scratch_folder_never_outlives_the_check(tmp_path, ends, status, kept):
    """Whatever ends the check, OUT/.determinism-check is gone: removed, or renamed to
    the named folder when there is a failed run to read."""
    out = tmp_path / "out"
    runs, log = _Runs(*ends), io.StringIO()
    if status is None:
        with pytest.raises(type(ends[-1])):
            run_twice(out, runs, log, "t")
    else:
        assert run_twice(out, runs, log, "t") == status
    assert runs.folders[0] == out / FIRST_RUN_DIR
    assert not (out / FIRST_RUN_DIR).exists()
    assert (out / KEPT_FIRST_RUN_DIR / "out_jobs.csv").exists() is kept
    if kept:
        assert f"kept in {out / KEPT_FIRST_RUN_DIR}" in log.getvalue()


def test_a_killed_checks_scratch_folder_is_removed_by_the_next_run(tmp_path, subprocess_env):
    """A check killed without its clean-up (SIGKILL) leaves OUT/.determinism-check; the
    next `timewarp simulate` into OUT removes it, and says so."""
    platform, workload = _inputs(tmp_path)
    scratch = tmp_path / "out" / FIRST_RUN_DIR
    scratch.mkdir(parents=True)
    (scratch / "out_jobs.csv").write_text("job_id\n1\n")  # half a run
    r = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
         "--scheduler", DEFAULT_LIKE, "-p", str(platform), "-w", str(workload),
         "-o", str(tmp_path / "out")],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert not scratch.exists()
    assert f"removed {scratch}, the scratch folder of an earlier --check-determinism" in r.stderr
