"""The end of a run: a scheduler process still there after the grace that follows
``Launcher.stop_all``'s SIGTERM is killed, and the kill is said — on stderr and in
``exits()`` (the manifest's ``processes.<name>.ended``) — so that a log lacking its last
lines in one run of two names its cause instead of leaving it to guesses."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from broker.processes.launcher import Launcher
from commands.process_figures import summary_lines

READY = "import signal; print('ready', flush=True); signal.pause()"  # ends on SIGTERM
STUBBORN = (
    "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); signal.pause()"
)


class _Facade:
    """What a non-virtual Launcher asks of the facade: a token and a kubeconfig."""

    def add_token(self, name: str) -> str:
        return f"token-{name}"

    def write_kubeconfig(self, path: Path, name: str) -> Path:
        path.write_text("apiVersion: v1\nkind: Config\n")
        return path


def _wait_ready(log: Path, timeout: float = 120.0) -> None:
    """A process outside this one: there is nothing to wait on but its log (bounded)."""
    deadline = time.monotonic() + timeout
    tick = threading.Event()
    while not (log.exists() and "ready" in log.read_text()):
        assert time.monotonic() < deadline, f"{log} never said ready"
        tick.wait(0.05)


def test_a_process_still_there_after_the_grace_is_killed_and_the_kill_is_said(tmp_path, capsys):
    launcher = Launcher(clock=None, facade=_Facade(), out_dir=tmp_path, virtual=False)  # type: ignore[arg-type]
    polite = launcher.start(["python", "-c", READY], name="polite")
    stubborn = launcher.start(["python", "-c", STUBBORN], name="stubborn")
    for proc in (polite, stubborn):
        _wait_ready(proc.log_path)
    launcher.stop_all(grace_s=0.5)
    err = capsys.readouterr().err
    assert "scheduler 'stubborn'" in err and "killed (SIGKILL)" in err, err
    assert "0.5 s (wall time) after the SIGTERM" in err and str(stubborn.log_path) in err
    assert "'polite'" not in err  # it ended on SIGTERM: nothing to say
    ended = launcher.exits()
    assert ended == {"stubborn": {"killed": "SIGKILL", "after_sigterm_s": 0.5}}
    (line,) = summary_lines({"stubborn": {"requests": 0, "ended": ended["stubborn"]}})
    assert line.endswith("killed (SIGKILL) 0.5 s after the final SIGTERM"), line
