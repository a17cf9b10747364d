"""A simulator that stops before the end of the simulation fails the run with its own
reason, in the summary and the manifest; platforms real Batsim refuses are refused (with
--batsim) or noted (embedded simulator) before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from simrun import run_simulate

from commands.simulating.simulator import simulator_message

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "inputs"
STUCK = f"python {ROOT / 'tests/programs/list_then_hang.py'}"
DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"


def test_a_scheduler_that_never_binds_fails_with_the_simulators_deadlock_report(
    tmp_path, subprocess_env
):
    # (--on-no-progress warn: by default the broker's no-progress stop comes first, see
    # tests/test_first_hour.py; here the simulator's own report is the subject)
    """A first scheduler that lists the pods once and then waits for good (no timer, no
    watch whose renewals would move time on): the embedded simulator finds nothing left
    to happen and stops with its deadlock report, which is the reason given — not the
    broker's "no message from Batsim for 0.5 s" that followed."""
    out = tmp_path / "out"
    proc = run_simulate(
        out, subprocess_env, STUCK, EXAMPLES / "cluster16.xml",
        EXAMPLES / "burst_40_delay170.json", "--on-no-progress", "warn",
    )  # fmt: skip
    assert proc.returncode == 1
    manifest = json.loads((out / "manifest.json").read_text())
    reason = manifest["reason"]
    assert manifest["ok"] is False
    assert reason.startswith("the embedded simulator exited with code 1 before the end")
    assert "40 submitted job(s) neither executed nor rejected: w0!1, w0!2" in reason
    assert "no message from Batsim" not in proc.stderr
    assert f"FAILED: {reason}" in proc.stderr


def _smpi_platform(tmp_path: Path) -> Path:
    platform = tmp_path / "smpi.xml"
    platform.write_text(
        (EXAMPLES / "cluster16.xml")
        .read_text()
        .replace(
            '<platform version="4.1">\n',
            '<platform version="4.1">\n  <config id="General">\n'
            '    <prop id="maxmin/precision" value="1e-9"/>\n'
            '    <prop id="smpi/or" value="0:8.1e-06:8.3e-10"/>\n  </config>\n',
        )
    )
    return platform


def _simulate_with_batsim(tmp_path: Path, env: dict, platform: Path):
    """`timewarp simulate --batsim /bin/true` on ``platform`` (a Batsim that would
    do nothing: the platform check comes first); returns (process, outputs directory)."""
    out = tmp_path / "out"
    proc = run_simulate(
        out, env, DEFAULT_LIKE, platform, EXAMPLES / "burst_40_delay170.json",
        "--batsim", "/bin/true",
    )  # fmt: skip
    return proc, out


def test_a_platform_real_batsim_aborts_on_is_refused_before_anything_starts(
    tmp_path, subprocess_env
):
    """Batkube's platforms carry smpi/or and smpi/os, which SimGrid 3.32 refuses ("Bad
    config key"): with --batsim, say so before starting, with file, line and remedy."""
    platform = _smpi_platform(tmp_path)
    proc, out = _simulate_with_batsim(tmp_path, subprocess_env, platform)
    assert proc.returncode == 2
    assert f'{platform}:6: <prop id="smpi/or"> in <config>' in proc.stderr
    assert '"Bad config key: smpi/or"' in proc.stderr and "fix these lines" in proc.stderr
    assert not out.exists()  # nothing started, nothing written


def test_the_embedded_simulator_runs_such_a_platform_and_notes_it(tmp_path, subprocess_env):
    platform = _smpi_platform(tmp_path)
    out = tmp_path / "out"
    proc = run_simulate(
        out, subprocess_env, DEFAULT_LIKE, platform, EXAMPLES / "burst_40_delay170.json"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f'note: {platform}:6: <prop id="smpi/or">' in proc.stderr
    assert "the embedded simulator accepts it" in proc.stderr


def test_a_platform_without_its_doctype_is_refused_with_batsim(tmp_path, subprocess_env):
    """SimGrid 3.32's parser stops at a platform file without <!DOCTYPE platform …>
    ("Unexpected character '<' in prolog"); say so before starting."""
    platform = tmp_path / "bare.xml"
    platform.write_text(
        "\n".join(
            line
            for line in (EXAMPLES / "cluster16.xml").read_text().splitlines()
            if not line.startswith("<!DOCTYPE")
        )
    )
    proc, out = _simulate_with_batsim(tmp_path, subprocess_env, platform)
    assert proc.returncode == 2
    assert f"{platform}: no <!DOCTYPE platform" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "log, message",
    [
        (
            "timewarp sim: deadlock: nothing left to happen at t=0 s but the simulation "
            "cannot end; 3 submitted job(s) neither executed nor rejected: w0!1\n"
            "timewarp sim: partial outputs written (0 of 3 jobs ended by t=0 s): a, b, c\n",
            "deadlock: nothing left to happen at t=0 s but the simulation cannot end; 3 "
            "submitted job(s) neither executed nor rejected: w0!1",
        ),
        (
            "[0.000000] [xbt_cfg/INFO] Configuration change: Set 'host/model' to 'ptask_L07'\n"
            "[0.000000] ./src/xbt/exception.cpp:48: [xbt_exception/CRITICAL] Uncaught "
            "exception std::out_of_range: Bad config key: smpi/or\nExisting config keys:\n"
            "  bmf/max-iterations: (int)1000\n"
            "[0.000000] ./src/xbt/exception.cpp:75: [xbt_exception/CRITICAL] Current backtrace:\n",
            "Uncaught exception std::out_of_range: Bad config key: smpi/or",
        ),
        (
            "[0.000000] ./src/kernel/EngineImpl.cpp:718: [ker_engine/CRITICAL] Oops! Deadlock "
            "detected, some activities are still around but will never complete.\n"
            "[0.000000] [jobs/INFO] Job 'w0!29' is being deleted\n",
            "Oops! Deadlock detected, some activities are still around but will never complete.",
        ),
        ("", "(its log is empty)"),
    ],
)
def test_the_simulators_own_message_is_taken_from_its_log(tmp_path, log, message):
    path = tmp_path / "simulator.log"
    path.write_text(log)
    assert simulator_message(path) == message
