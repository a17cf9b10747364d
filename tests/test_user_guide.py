"""Every command the user guide shows runs as written (issue 15 item 15).

The ```bash blocks of docs/user-guide.md run in order as one bash session (``set -eux``),
from a scratch copy of the checkout (its entries symlinked, so the outputs the guide
writes — out/, build/ — land in the scratch folder); then the ```python blocks, with the
venv's interpreter; then each block marked ``<!-- terminals -->``, whose commands are meant
for separate terminals: started in order, each in its own bash. Any command that fails
fails the test, with its output.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "user-guide.md"
SCRATCH_SKIP = {"out", "build", "results", ".git", ".pytest_cache", ".hypothesis", "__pycache__"}
BLOCK = re.compile(r"(<!-- terminals -->\n)?```(bash|python)\n(.*?)```", re.S)


def blocks(text: str) -> list[tuple[str, str]]:
    """(kind, code) in order: kind is bash, terminals or python."""
    out = []
    for marker, lang, code in BLOCK.findall(text):
        out.append(("terminals" if marker else lang, code))
    return out


def commands(code: str) -> list[str]:
    """One command per line, continuation lines joined."""
    return [c.strip() for c in code.replace("\\\n", " ").splitlines() if c.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scratch_checkout(tmp_path: Path) -> Path:
    where = tmp_path / "checkout"
    where.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in SCRATCH_SKIP:
            (where / entry.name).symlink_to(entry)
    return where


def test_the_guide_shows_commands():
    kinds = [kind for kind, _ in blocks(GUIDE.read_text())]
    assert kinds.count("bash") >= 5 and "terminals" in kinds and "python" in kinds


@pytest.fixture
def venv() -> Path:
    activate = ROOT / ".venv" / "bin" / "activate"
    if not activate.exists():  # the guide's commands run in it
        pytest.skip("no .venv in the checkout (scripts/setup-venv.sh makes it; CI does)")
    # The guide's install step re-installs only when pyproject.toml or the script changed
    # since the venv was made: run from the scratch copy, that would point the venv at
    # the scratch folder. CI runs the script first; so must a person after such a change.
    made_for = (ROOT / ".venv" / ".timewarp-installed").read_text().strip()
    digest = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes() + (ROOT / "scripts" / "setup-venv.sh").read_bytes()
    ).hexdigest()
    if made_for != digest:
        pytest.fail("the .venv is older than pyproject.toml: run `bash scripts/setup-venv.sh`")
    return activate


# The guide's commands are a whole study (several simulations, a sweep, a report): on a
# loaded 2-CPU machine they take longer than the suite's 300 s hang guard. The bounds
# that matter are the subprocesses' own (1200 s for the bash session).
@pytest.mark.timeout(2400)
def test_every_command_of_the_user_guide_runs_as_written(tmp_path, subprocess_env, venv):
    where = scratch_checkout(tmp_path)
    port = str(free_port())  # the guide's 28000 may be taken on a shared machine
    found = [
        (k, c.replace("127.0.0.1:28000", f"127.0.0.1:{port}")) for k, c in blocks(GUIDE.read_text())
    ]
    # the bash blocks in order, as one session (`source .venv/bin/activate` serves them all)
    script = "set -euxo pipefail\n" + "".join(code for kind, code in found if kind == "bash")
    code, stderr = run_session(script, where, subprocess_env, timeout=1200)
    assert code == 0, f"a command failed (set -x trace):\n{stderr[-5000:]}"
    for code in (code for kind, code in found if kind == "python"):
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=where, env=subprocess_env, capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, f"python block failed:\n{code}\n{proc.stderr[-3000:]}"
    for code in (code for kind, code in found if kind == "terminals"):
        run_terminals(commands(code), where, subprocess_env)


def run_session(script: str, where: Path, env: dict, timeout: float) -> tuple[int, str]:
    """``script`` in one bash, in its own process group, killed whole when it is over: a
    command the guide starts in the background (`... &`) and a failed line left running
    (a paused run never resumed) must not keep the pipes open — the test would wait on
    them for ever instead of reporting the line that failed."""
    log = where.parent / "guide-session.log"  # a file, not a pipe: nothing to drain
    with open(log, "w") as err:
        proc = subprocess.Popen(
            ["bash", "-c", script], cwd=where, env=env, stdout=subprocess.DEVNULL,
            stderr=err, start_new_session=True,
        )  # fmt: skip
        try:
            code = proc.wait(timeout)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return code, log.read_text(errors="replace")


def run_terminals(lines: list[str], where: Path, env: dict) -> None:
    """Each line in its own bash, in order, the last in the foreground; before a line
    that sources a file, wait (bounded) until the terminals before it wrote the file, as
    a person would. Every one must end well."""
    procs: list[subprocess.Popen] = []
    activate = f"source {where / '.venv' / 'bin' / 'activate'}\n"
    try:
        for line in lines:
            for sourced in re.findall(r"source (\S+)", line):
                wait_for_file(where / sourced, procs)
            procs.append(
                subprocess.Popen(
                    ["bash", "-c", activate + line],
                    cwd=where,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    start_new_session=True,
                )  # fmt: skip
            )
        for line, proc in zip(lines, procs, strict=True):
            out, _ = proc.communicate(timeout=600)
            # a scheduler started by hand is stopped by its runtime when the broker ends
            # with the simulation (as the guide says): exit status 3, "... is gone"
            stopped_with_the_broker = proc.returncode == 3 and "is gone (" in out
            assert proc.returncode == 0 or stopped_with_the_broker, f"{line}\n{out[-3000:]}"
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()


def wait_for_file(path: Path, procs: list[subprocess.Popen], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not path.exists():
        assert all(p.poll() is None for p in procs), f"a terminal ended before {path} existed"
        assert time.monotonic() < deadline, f"{path} never appeared"
        pause.wait(0.1)


def test_the_simulators_run_it_block_runs_as_written(tmp_path, subprocess_env, venv):
    """docs/simulator.md's first block: pasted, it must end by itself (it used to start the
    simulator in the foreground before any decision process, and wait forever)."""
    text = (ROOT / "docs" / "simulator.md").read_text()
    code = text.split("## Run it", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    code = code.replace("127.0.0.1:28000", f"127.0.0.1:{free_port()}")
    where = scratch_checkout(tmp_path)
    activate = f"source {where / '.venv' / 'bin' / 'activate'}\n"
    proc = subprocess.run(
        ["bash", "-c", "set -euxo pipefail\n" + activate + code], cwd=where, env=subprocess_env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (where / "out" / "burst_jobs.csv").exists()
