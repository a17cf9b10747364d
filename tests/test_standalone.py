"""`timewarp run --standalone`: whole programs in virtual time, no simulator."""

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / "programs"


def tw_run(args, env, timeout=60, **kw):
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "run", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def standalone(program, env, *extra, timeout=60):
    return tw_run(
        ["--standalone", "--no-import-hook", *extra, "--", sys.executable, str(PROGRAMS / program)],
        env,
        timeout=timeout,
    )


def test_a_simulated_day_of_ten_threads_is_fast_and_reproducible(subprocess_env):
    first = standalone("day_direct.py", subprocess_env)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[:4] == [
        "2026-01-01 06:00:00 689",
        "2026-01-01 12:00:00 1388",
        "2026-01-01 18:00:00 2087",
        "2026-01-02 00:00:00 2786",
    ]
    assert (
        lines[-1]
        == "end 2026-01-02 00:00:00+00:00 2796 [1440, 720, 288, 144, 96, 48, 24, 16, 12, 8]"
    )
    assert "simulated 1d 00:00:00.000" in first.stderr
    second = standalone("day_direct.py", subprocess_env)
    assert second.stdout == first.stdout


def test_epoch_is_configurable(subprocess_env):
    proc = standalone("day_direct.py", subprocess_env, "--epoch", "2030-06-01T00:00:00")
    assert proc.stdout.splitlines()[0] == "2030-06-01 06:00:00 689"


def test_asyncio_timeouts_follow_virtual_time(subprocess_env):
    proc = standalone("asyncio_direct.py", subprocess_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "wait_for timed out after 10.0",
        "timeout ctx fired at 16.0",
        "wait: 0 1 46.0",
        "later 53.0",
        "tick 0 113.0 1767225713.0",
        "tick 1 173.0 1767225773.0",
        "tick 2 233.0 1767225833.0",
        "exec 235.0",
    ]


def test_asyncio_and_thread_pools_are_virtualised_only_once_imported(subprocess_env):
    # A program that never imports asyncio does not pay for it at start-up; one that
    # does gets the virtual-time policy and pools all the same.
    proc = standalone("lazy_stdlib.py", subprocess_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "asyncio loaded: False",
        "futures loaded: False",
        "policy: VirtualEventLoopPolicy",
        "pool queue: ModuleShim",
    ]


def test_timer_chain_fires_at_exact_virtual_instants(subprocess_env):
    proc = standalone("timer_chain_direct.py", subprocess_env)
    assert proc.returncode == 0, proc.stderr
    s = 1_000_000_000
    assert proc.stdout.strip() == str(
        [(0, 1 * s), (1, 2 * s), (2, 4 * s), (3, 8 * s), (4, 16 * s), (5, 32 * s)]
    )


def test_deadlock_is_reported_with_stacks(subprocess_env):
    proc = standalone("deadlock.py", subprocess_env)
    assert proc.returncode == 1
    assert "waiting forever" in proc.stdout
    assert "deadlock at virtual t=5.000000000 s" in proc.stderr
    assert "event.wait()" in proc.stderr  # the stuck line of the program


def test_stall_guard_names_the_real_wait_and_counts_it(subprocess_env):
    proc = tw_run(
        [
            "--standalone",
            "--no-import-hook",
            "--stall-timeout",
            "1",
            "--",
            sys.executable,
            str(PROGRAMS / "stuck_in_real_sleep.py"),
            "4",
        ],
        subprocess_env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "stall guard" in proc.stderr
    assert "real_time.sleep" in proc.stderr
    assert "ticks done at 181.0" in proc.stdout
    # counted, never hidden (a loaded machine may add spurious ones: >= 1)
    counted = re.search(r"(\d+) non-deterministic advances", proc.stderr)
    assert counted and int(counted.group(1)) >= 1


def test_stall_guard_can_stop_the_run(subprocess_env):
    proc = tw_run(
        [
            "--standalone",
            "--no-import-hook",
            "--stall-timeout",
            "0.3",
            "--on-stall",
            "stop",
            "--",
            sys.executable,
            str(PROGRAMS / "stuck_in_real_sleep.py"),
            "30",
        ],
        subprocess_env,
    )
    assert proc.returncode != 0
    assert "stall guard" in proc.stderr


def test_unreachable_broker_is_a_clear_error_within_bounded_time(subprocess_env):
    env = dict(subprocess_env, TIMEWARP_CLOCK="tcp://127.0.0.1:9", TIMEWARP_CONNECT_TIMEOUT="0.5")
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", "from timewarp import vtime; vtime.sleep(1)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 3
    assert "no answer from the broker's clock service at tcp://127.0.0.1:9" in proc.stderr
    assert time.monotonic() - start < 10


def test_program_stops_when_its_broker_dies(subprocess_env):
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "timewarp",
            "run",
            "--standalone",
            "--no-import-hook",
            "--stall-timeout",
            "60",
            "--",
            sys.executable,
            str(PROGRAMS / "stuck_in_real_sleep.py"),
            "60",
        ],
        env=subprocess_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    child_pid = int(runner.stdout.readline())
    child = os.pidfd_open(child_pid)  # readable once the child has exited
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(10)
    _, err = runner.communicate(timeout=20)  # EOF once the orphaned child closed its pipes
    assert "the broker (pid" in err and "is gone" in err
    exited, _, _ = select.select([child], [], [], 20)
    os.close(child)
    assert exited, "the program outlived its broker"
    assert not _running(child_pid)


def _running(pid):
    """True while pid is a live process (an exited, unreaped orphan is a zombie: 'Z')."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_concurrent_now_calls_share_round_trips(subprocess_env):
    proc = tw_run(
        [
            "--standalone",
            "--no-import-hook",
            "--threads",
            "free",
            "-q",
            "--",
            sys.executable,
            str(PROGRAMS / "now_storm.py"),
        ],
        subprocess_env,
    )
    assert proc.returncode == 0, proc.stderr
    calls, round_trips = map(int, proc.stdout.split())
    assert calls == 800
    assert round_trips < calls


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give the program to run after --"),
        (["--", "python", "x.py"], "no broker to connect to"),
        (["--standalone", "--", "no-such-program-xyz"], "program not found"),
        (["--standalone", "--stall-timeout", "-1", "--", "python"], "positive number of seconds"),
        (["--standalone", "--epoch", "yesterday", "--", "python"], "--epoch: expected an ISO date"),
    ],
)
def test_bad_arguments_are_rejected_clearly(args, message, subprocess_env):
    proc = tw_run(args, subprocess_env)
    assert proc.returncode == 2
    assert message in proc.stderr
