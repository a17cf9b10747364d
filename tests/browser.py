"""Headless Chromium for the tests that check what a page draws (Debian's `chromium`
package; scripts/test.sh installs it). Without it those tests skip with the reason —
under CI (``CI=true``) they fail instead."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run")


def chromium() -> str:
    """The browser's path, or skip (fail under CI)."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    problem = "headless Chromium not found (apt-get install -y chromium; scripts/test.sh does)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{problem} — under CI the browser tests must run, not skip")
    pytest.skip(problem)


def _run(args: list[str], home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home)}  # its profile in the test's folder
    return subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={home / 'profile'}", *args],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def dump_dom(page: Path, home: Path) -> str:
    """The page's DOM after loading (its scripts run)."""
    done = _run(["--virtual-time-budget=5000", "--dump-dom", page.resolve().as_uri()], home)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def screenshot(page: Path, png: Path, home: Path, size: str = "1200,4000") -> Path:
    done = _run([f"--window-size={size}", f"--screenshot={png}", page.resolve().as_uri()], home)
    assert done.returncode == 0 and png.exists(), done.stderr[-2000:]
    return png
