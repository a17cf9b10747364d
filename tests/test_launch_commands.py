"""Scheduler command lines as people write them (issue 19, class 6; issue 15, item 3):
`env PYTHONPATH=deps python x.py` composes with the runtime's PYTHONPATH, `--cwd` with a
relative `-o` hands schedulers absolute paths, a nested `timewarp run` is unwrapped, and
a process that never joined the virtual clock is stopped and named at once."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from simrun import (
    ROOT,
    delay_profiles,
    one_core_jobs,
    placements,
    run_simulate,
    run_twice,
    write_inputs,
)

from broker.processes.launcher import unjoined_cause
from patcher import bootstrap, launch

PROGRAM = ROOT / "tests" / "programs" / "with_deps"
JOBS = one_core_jobs((0, "short"), (0, "short"), (0, "short"), (5, "long"))
PROFILES = delay_profiles(short=10, long=20)
# first fit by node name, polling every second (its first poll, at 0, came before the
# jobs): the three short jobs start at 1 s, the long one on the first node freed, at the
# first poll after the short ones ended
EXPECTED = {
    "1": ("0", "1.000000", "11.000000"),
    "2": ("1", "1.000000", "11.000000"),
    "3": ("2", "1.000000", "11.000000"),
    "4": ("0", "11.000000", "31.000000"),
}


@pytest.fixture
def inputs(tmp_path):
    return write_inputs(tmp_path, JOBS, PROFILES, nodes=3)


@pytest.fixture
def project(tmp_path):
    """The scheduler's own folder (sched.py, deps/), somewhere else than the checkout."""
    dest = tmp_path / "myscheduler"
    shutil.copytree(PROGRAM, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


# ----------------------------------------------------------------- command lines


def test_env_prefix_is_applied_and_pythonpath_composed():
    parsed = launch.parse_launch(["env", "PYTHONPATH=deps", "FOO=1", "python", "x.py", "-v"])
    assert parsed.argv == ["python", "x.py", "-v"]
    env = launch.runtime_environment(parsed.environment({"PYTHONPATH": "/old", "BAR": "2"}))
    entries = env["PYTHONPATH"].split(":")
    assert entries == [str(launch.BOOT_DIR), str(launch.PACKAGE_ROOT), "deps"]
    assert env["FOO"] == "1" and env["BAR"] == "2"


def test_env_clear_and_unset():
    parsed = launch.parse_launch(["env", "-i", "A=1", "python", "x.py"])
    assert parsed.environment({"B": "2"}) == {"A": "1"}
    parsed = launch.parse_launch(["/usr/bin/env", "-u", "B", "--", "python", "x.py"])
    assert parsed.environment({"B": "2", "C": "3"}) == {"C": "3"}
    assert parsed.argv == ["python", "x.py"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["env", "-S", "python x.py"], "`env -S` is not supported"),
        (["env", "A=1"], "`env` without a command"),
        (["timewarp", "run", "--standalone", "--", "python", "x.py"], "drop --standalone"),
        (["timewarp", "run", "--epoch", "0", "--", "python", "x.py"], "no meaning under"),
        (
            ["timewarp", "run", "--seed=3", "--", "python", "x.py"],
            "from the run.s .`timewarp simulate --seed",
        ),
        (["timewarp", "run", "--"], "without a program"),
    ],
)
def test_command_lines_that_cannot_work_are_refused_by_name(argv, message):
    with pytest.raises(launch.LaunchError, match=message.replace("`", ".").replace("-", ".")):
        launch.parse_launch(argv)


def test_a_nested_timewarp_run_is_unwrapped_with_its_options():
    parsed = launch.parse_launch(
        ["timewarp", "run", "--no-import-hook", "--patch-module", "apscheduler",
         "--patch-module=mylib", "--freeze-unpatched", "--", "env", "X=1", "python", "b.py"]
    )  # fmt: skip
    assert parsed.argv == ["python", "b.py"]
    assert parsed.patch_modules == ["apscheduler", "mylib"]
    assert not parsed.import_hook and parsed.freeze_unpatched
    assert parsed.set_env == {"X": "1"}
    parsed = launch.parse_launch([sys.executable, "-m", "timewarp", "run", "--", "python", "c.py"])
    assert parsed.argv == ["python", "c.py"] and parsed.import_hook


@pytest.mark.parametrize(
    ("orig_argv", "cli"),
    [
        (["python", "/venv/bin/timewarp", "run", "--", "python", "x.py"], None),  # see below
        (["python", "-m", "timewarp", "run"], True),
        (["python", "-X", "dev", "-m", "timewarp", "simulate"], True),
        (["python", "-mtimewarp", "run"], True),
        (["python", "-m", "patcher.run_script", "timewarp"], False),
        (["python", "sched.py"], False),
        (["python", "-c", "import timewarp"], False),
        (["python"], False),
    ],
)
def test_the_timewarp_command_itself_never_joins_the_clock(orig_argv, cli):
    if cli is None:  # the console script: recognised by its content
        script = shutil.which("timewarp") or str(Path(sys.executable).parent / "timewarp")
        orig_argv = [orig_argv[0], script, *orig_argv[2:]]
        cli = Path(script).is_file()
    assert bootstrap.is_timewarp_cli(orig_argv) is cli


def test_the_likely_cause_names_the_culprit():
    assert "-E, -I, -S" in unjoined_cause(["python3", "-I", "x.py"])
    assert "replaces PYTHONPATH" in unjoined_cause(["bash", "-c", "PYTHONPATH=x python y.py"])
    assert "not a Python process" in unjoined_cause(["./run-it"])


# ----------------------------------------------------------------- end to end


def test_env_pythonpath_with_cwd_and_relative_output_runs_in_virtual_time(
    tmp_path, subprocess_env, inputs, project
):
    """From the user's own directory: `--cwd myscheduler` and `-o runN` (relative to where
    `timewarp simulate` runs, not to the scheduler's folder); twice, same bytes."""
    platform, workload = inputs
    out, r = run_twice(
        Path("."), subprocess_env,
        "env PYTHONPATH=deps python sched.py --scheduler-name default",
        platform, workload, "--cwd", str(project), cwd=tmp_path,
    )  # fmt: skip
    assert placements(out) == EXPECTED
    assert out == tmp_path / "run1" and not (project / "run1").exists()
    log = (out / "scheduler-0.log").read_text()
    assert "bound w0.4 to n000" in log, log


def test_a_scheduler_that_never_joined_the_clock_is_stopped_at_its_first_request(
    tmp_path, subprocess_env, inputs, project
):
    """A shell that replaces PYTHONPATH: the interpreter never loads timewarp's start-up
    hook. It must not run on the wall clock: stopped, named, with the likely cause."""
    platform, workload = inputs
    out = tmp_path / "out"
    command = f"bash -c 'PYTHONPATH=deps exec {sys.executable} sched.py'"
    r = run_simulate(out, subprocess_env, command, platform, workload, "--cwd", str(project))
    assert r.returncode == 1, r.stderr[-3000:]
    assert "scheduler 'scheduler-0'" in r.stderr
    assert "without having joined the virtual clock" in r.stderr
    assert "replaces PYTHONPATH" in r.stderr
    assert "stall guard" not in r.stderr


def test_nested_timewarp_run_on_a_patched_copy(tmp_path, subprocess_env, inputs, project):
    """The documented "patch ahead of time, then run" path inside `simulate` (issue 15,
    item 3): `timewarp run --no-import-hook -- python build/sched.py`."""
    platform, workload = inputs
    patched = subprocess.run(
        [sys.executable, "-m", "timewarp", "patch", "sched.py", "-o", "build/"],
        cwd=project, env=subprocess_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert patched.returncode == 0, patched.stderr
    out, r = run_twice(
        tmp_path, subprocess_env,
        "timewarp run --no-import-hook -- env PYTHONPATH=deps python build/sched.py",
        platform, workload, "--cwd", str(project),
    )  # fmt: skip
    assert placements(out) == EXPECTED
    assert "stall guard" not in r.stderr and "#2" not in r.stderr


def test_simulate_no_import_hook_runs_a_patched_copy(tmp_path, subprocess_env, inputs, project):
    platform, workload = inputs
    subprocess.run(
        [sys.executable, "-m", "timewarp", "patch", "sched.py", "-o", "build/"],
        cwd=project, env=subprocess_env, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, "env PYTHONPATH=deps python build/sched.py", platform, workload,
        "--no-import-hook", "--cwd", str(project),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert placements(out) == EXPECTED


def test_a_bad_scheduler_command_is_refused_before_anything_starts(
    tmp_path, subprocess_env, inputs
):
    platform, workload = inputs
    r = run_simulate(tmp_path / "o", subprocess_env, "env -S 'python x.py'", platform, workload)
    assert r.returncode == 2
    assert "--scheduler \"env -S 'python x.py'\": `env -S` is not supported" in r.stderr


def test_a_scheduler_that_exits_without_joining_says_so(tmp_path, subprocess_env, inputs):
    platform, workload = inputs
    command = f"bash -c 'PYTHONPATH=deps exec {sys.executable} -c \"raise SystemExit(3)\"'"
    r = run_simulate(tmp_path / "out", subprocess_env, command, platform, workload)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "exited with code 3 without ever joining the virtual clock" in r.stderr
    assert "replaces PYTHONPATH" in r.stderr


@pytest.mark.parametrize("mode", ["deterministic", "lockstep", "realtime"])
def test_a_bare_python_is_timewarps_interpreter_in_every_mode(
    tmp_path, subprocess_env, inputs, mode
):
    """Issue 27 item 14: deterministic mode ran `python` as timewarp's interpreter,
    realtime and lockstep whatever `python` came first on PATH."""
    platform, workload = inputs
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("python", "python3"):
        (fake / name).write_text("#!/bin/sh\necho 'the python on PATH' >&2\nexit 7\n")
        (fake / name).chmod(0o755)
    env = {**subprocess_env, "PATH": f"{fake}:{subprocess_env.get('PATH', '')}"}
    command = "python -c 'import sys; print(\"interpreter:\", sys.executable, flush=True)'"
    out = tmp_path / "out"
    run_simulate(out, env, command, platform, workload, "--mode", mode)
    log = (out / "scheduler-0.log").read_text()
    assert f"interpreter: {sys.executable}" in log, log
    assert "the python on PATH" not in log
