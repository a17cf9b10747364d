"""The bundled examples, written the ordinary way (real `time`, `threading`, `asyncio`),
run unmodified under `timewarp run --standalone`: the import hook rewrites them."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_example(name, env):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "timewarp",
            "run",
            "--standalone",
            "--",
            "python",
            f"examples/{name}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("name", "expected_last_line", "simulated"),
    [
        (
            "ticking_day.py",
            "2026-01-02 00:00:00  day over: 2796 ticks (1440, 720, 288, 144, 96, 48, 24, 16, 12, 8)",
            "1d 00:00:00.000",
        ),
        ("asyncio_timeouts.py", "   125.0s  blocking call in a thread: done", "00:02:05.000"),
        ("timer_chain.py", "chain done", "00:01:04.000"),
    ],
)
def test_examples_run_in_virtual_time_and_repeat_exactly(
    name, expected_last_line, simulated, subprocess_env
):
    first = run_example(name, subprocess_env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == expected_last_line
    assert f"simulated {simulated}" in first.stderr
    assert "0 non-deterministic advances" in first.stderr
    second = run_example(name, subprocess_env)
    assert second.stdout == first.stdout
