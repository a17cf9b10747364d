"""Patched code behaves like the original: the same output in passthrough (no broker, as
on a real cluster), and virtual timestamps under ``timewarp run --standalone``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / "corpus" / "patcher" / "programs"

pytest.importorskip("timewarp.vtime", reason="the timewarp runtime is not on this branch yet")


def run(args: list[str], env: dict[str, str], cwd: Path | None = None) -> str:
    proc = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def timewarp(*args: str) -> list[str]:
    return [sys.executable, "-m", "timewarp", *args]


@pytest.fixture
def patched_everything(tmp_path: Path, subprocess_env: dict[str, str]) -> tuple[Path, Path]:
    original = tmp_path / "everything.py"
    shutil.copy(PROGRAMS / "everything.py", original)
    patched = tmp_path / "build" / "everything.py"
    run(timewarp("patch", str(tmp_path), "-o", str(tmp_path / "build")), subprocess_env)
    assert "_timewarp_vthreading" in patched.read_text()
    return original, patched


def test_patched_program_prints_the_same_in_passthrough(
    patched_everything: tuple[Path, Path], subprocess_env: dict[str, str]
) -> None:
    original, patched = patched_everything
    expected = run([sys.executable, str(original)], subprocess_env)
    assert expected.splitlines()[0] == "[1, 2, 3]"
    assert run([sys.executable, str(patched)], subprocess_env) == expected


def test_patched_program_prints_the_same_in_virtual_time(
    patched_everything: tuple[Path, Path], subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    original, patched = patched_everything
    expected = run([sys.executable, str(original)], subprocess_env)
    virtual = run(
        timewarp("run", "--standalone", "--no-import-hook", "-q", "--", "python", str(patched)),
        subprocess_env,
    )
    assert virtual == expected


CLOCK_PROGRAM = """\
import time
from datetime import datetime, timezone

start = time.time()
time.sleep(3600)
print(start, time.time(), datetime.now(timezone.utc).isoformat())
"""


def test_ahead_of_time_patched_code_reads_virtual_time(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    source = tmp_path / "clock.py"
    source.write_text(CLOCK_PROGRAM)
    run(timewarp("patch", str(source), "--in-place"), subprocess_env)
    out = run(
        timewarp(
            "run",
            "--standalone",
            "--no-import-hook",
            "-q",
            "--epoch",
            "2026-01-01T00:00:00Z",
            "--",
            "python",
            str(source),
        ),  # fmt: skip
        subprocess_env,
    )
    assert out == "1767225600.0 1767229200.0 2026-01-01T01:00:00+00:00\n"


def test_import_hook_patches_the_program_on_import(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    (tmp_path / "clockmod.py").write_text(CLOCK_PROGRAM)
    env = dict(subprocess_env, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env["PYTHONPATH"] += f":{tmp_path}"
    out = run(
        timewarp(
            "run",
            "--standalone",
            "-q",
            "--epoch",
            "2026-01-01T00:00:00Z",
            "--",
            "python",
            "-m",
            "clockmod",
        ),  # fmt: skip
        env,
        cwd=tmp_path,
    )
    assert out == "1767225600.0 1767229200.0 2026-01-01T01:00:00+00:00\n"
    assert (tmp_path / "clockmod.py").read_text() == CLOCK_PROGRAM  # never edited on disk


@pytest.fixture(scope="module")
def vendored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """APScheduler and the app, patched ahead of time (``--package`` and a file)."""
    root = tmp_path_factory.mktemp("vendored")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMEWARP_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    run(timewarp("patch", "--package", "apscheduler", "-o", str(root / "vendor")), env)
    run(timewarp("patch", str(PROGRAMS / "aps_interval.py"), "-o", str(root / "app.py")), env)
    return root


def test_patched_apscheduler_runs_in_real_time_without_timewarp(
    vendored: Path, subprocess_env: dict[str, str]
) -> None:
    env = dict(subprocess_env)
    env["PYTHONPATH"] = f"{vendored / 'vendor'}:{env['PYTHONPATH']}"
    started = time.monotonic()
    out = run([sys.executable, str(vendored / "app.py"), "0.05", "3"], env)
    assert out == "3 runs\n"
    assert time.monotonic() - started >= 0.15  # it really waited


def test_patched_apscheduler_runs_in_virtual_time_under_timewarp(
    vendored: Path, subprocess_env: dict[str, str]
) -> None:
    env = dict(subprocess_env)
    env["PYTHONPATH"] = f"{vendored / 'vendor'}:{env['PYTHONPATH']}"
    out = run(
        timewarp(
            "run",
            "--standalone",
            "--no-import-hook",
            "-q",
            "--",
            "python",
            str(vendored / "app.py"),
            "60",
            "60",
            "--times",
        ),  # fmt: skip
        env,
    )
    assert out == "60 runs\nfirst 00:01:00, last 01:00:00\n"
