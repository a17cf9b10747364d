"""Pausing a simulation at a simulated instant, to look inside (``--pause-at``,
``--pause-on``, SIGUSR1), and resuming it (Enter, ``timewarp resume OUT``, SIGUSR2).

A pause happens in the broker's progress call-back, after a Batsim message, with the
whole simulation at rest: every scheduler is parked on a virtual wait, the simulator
waits for the broker's reply, and the clock cannot move because the driver that moves it
is the one holding still. The facade keeps serving HTTP from its own threads, so kubectl
and any client see the cluster as it is at that instant. Resuming returns from the
call-back as if no wall time had passed: a paused run writes the same bytes as an
unpaused one (what observers ask meanwhile changes nothing, see docs/security.md).

``--pause-at T`` arms a broker-side timer at T (as ``--until`` does), so the pause comes
at T exactly. ``--pause-on`` conditions are checked at each progress call-back:
``pending>D`` (a pod pending for longer than D of simulated time), ``refused`` (the
kubelet refused a pod), ``failed-rate>X`` (a service's failed share of requests over the
run above X, 0–1).

While paused, ``OUT/paused.json`` says when, why and which process to signal;
``timewarp resume OUT`` sends it SIGUSR2 and waits for the file to go.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from commands.outfiles import write_text_atomically

PAUSED_FILE = "paused.json"
PAUSE_SIGNAL = signal.SIGUSR1
RESUME_SIGNAL = signal.SIGUSR2
_CONDITION = re.compile(r"^(?:(refused)|(pending)>(.+)|(failed-rate)>(.+))$")


@dataclass(frozen=True)
class PauseCondition:
    """One ``--pause-on`` condition: ``kind`` is refused, pending or failed-rate."""

    kind: str
    threshold: float = 0.0
    text: str = ""


def parse_condition(text: str, parse_duration: Callable[[str], float]) -> PauseCondition:
    """``refused``, ``pending>10m`` or ``failed-rate>0.05`` (ValueError saying why)."""
    match = _CONDITION.match(text.strip())
    if not match:
        raise ValueError(
            f"expected refused, pending>DURATION (e.g. pending>10m) or failed-rate>X "
            f"(0 to 1), got {text!r}"
        )
    if match.group(1):
        return PauseCondition("refused", text=text)
    if match.group(2):
        return PauseCondition("pending", parse_duration(match.group(3)), text)
    rate = float(match.group(5))
    if not 0 <= rate < 1:
        raise ValueError(f"failed-rate>X needs 0 <= X < 1, got {match.group(5)!r}")
    return PauseCondition("failed-rate", rate, text)


class PauseGuard:
    """Decides when to pause (see the module docstring) and holds the run still until
    it is resumed. ``broker``: the running broker; ``out``: the output folder."""

    def __init__(
        self,
        broker: Any,
        out: Path,
        pause_at: list[float],
        conditions: list[PauseCondition],
        log: TextIO,
        prog: str,
        kubeconfig: str | None = None,
    ) -> None:
        self.broker = broker
        self.out = out
        self.pause_at = sorted(set(pause_at))
        self.conditions = conditions
        self.log = log
        self.prog = prog
        self.kubeconfig = kubeconfig
        self.pauses: list[dict[str, Any]] = []
        self._requested = threading.Event()  # SIGUSR1 came
        self._resume = threading.Event()
        self._fired: set[str] = set()  # a condition pauses once
        self._pending_since: dict[Any, float] = {}

    def arm(self, clock: Any) -> None:
        """Broker-side timers at each ``--pause-at`` instant (no-ops: their deadlines are
        the point: Batsim calls back at exactly T)."""
        for t_s in self.pause_at:
            clock.call_at(round(t_s * 1e9), lambda: None)

    def install_signals(self) -> None:
        """SIGUSR1 asks for a pause at the next instant; SIGUSR2 resumes (main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return
        signal.signal(PAUSE_SIGNAL, lambda *_: self._requested.set())
        signal.signal(RESUME_SIGNAL, lambda *_: self._resume.set())

    def check(self, now_s: float) -> None:
        reason = None
        while self.pause_at and now_s >= self.pause_at[0]:
            reason = f"--pause-at {self.pause_at.pop(0):g}"
        if self._requested.is_set():
            self._requested.clear()
            reason = reason or "asked (SIGUSR1)"
        for condition in self.conditions:
            if condition.text in self._fired:
                continue
            why = self._condition_holds(condition, now_s)
            if why:
                self._fired.add(condition.text)
                reason = reason or f"--pause-on {condition.text}: {why}"
        if reason:
            self.hold(now_s, reason)

    def _condition_holds(self, condition: PauseCondition, now_s: float) -> str:
        cluster = self.broker.cluster
        if condition.kind == "refused":
            refused = cluster.stats.rejected_by_kubelet
            return f"{refused} pod(s) refused by the kubelet" if refused else ""
        if condition.kind == "pending":
            with cluster.state_lock:
                pending = {key for key, jp in cluster.pods.items() if jp.state == "pending"}
            # when each pod was first seen pending, at the broker's steps (a submission is
            # a step: a workload's pod is seen at the instant it is submitted)
            self._pending_since = {k: self._pending_since.get(k, now_s) for k in pending}
            longest = max((now_s - t for t in self._pending_since.values()), default=0.0)
            if longest > condition.threshold:
                return f"a pod pending for {longest:,.0f} s"
            return ""
        services = getattr(self.broker, "services", None)
        for name, web in sorted((services.summary() if services else {}).items()):
            share = web["failed"] / web["requests"] if web["requests"] else 0.0
            if share > condition.threshold:
                return f"service {name}: {share:.1%} of its requests failed"
        return ""

    def hold(self, now_s: float, reason: str) -> None:
        """Write ``paused.json``, say how to look and how to go on, and wait for Enter,
        ``timewarp resume`` or SIGUSR2. A stop signal ends the wait (and the run)."""
        self._resume.clear()
        # "pause": this pause's number, so `timewarp resume` can tell that the run went
        # on even when it pauses again at once (a new note in the same file)
        number = len(self.pauses) + 1
        note = {"t_s": now_s, "reason": reason, "pid": os.getpid(), "pause": number}
        path = self.out / PAUSED_FILE
        write_text_atomically(path, json.dumps(note) + "\n")  # resume may read it meanwhile
        self.pauses.append({"t_s": now_s, "reason": reason})
        lines = [f"{self.prog}: PAUSED at simulated t={now_s:,.3f} s ({reason})"]
        if self.kubeconfig:
            lines.append(f"  look:   KUBECONFIG={self.kubeconfig} kubectl get pods -o wide")
        lines.append(
            f"  go on:  press Enter, or run `timewarp resume {self.out}` (SIGUSR2 to {os.getpid()})"
        )
        print("\n".join(lines), file=self.log, flush=True)
        if sys.stdin is not None and sys.stdin.isatty():
            threading.Thread(target=self._enter_resumes, daemon=True).start()
        try:
            while not self._resume.wait(0.2):  # short waits: a stop signal is handled
                pass
        finally:
            path.unlink(missing_ok=True)
        print(f"{self.prog}: resumed at simulated t={now_s:,.3f} s", file=self.log, flush=True)

    def _enter_resumes(self) -> None:
        try:
            sys.stdin.readline()
        except (OSError, ValueError):
            return
        self._resume.set()


def resume(out: Path, timeout_s: float = 30.0) -> str:
    """``timewarp resume OUT``: signal the paused run and wait until it has gone on.
    Returns what happened; raises ValueError when nothing there is paused."""
    path = out / PAUSED_FILE
    try:
        note = json.loads(path.read_text())
        pid = int(note["pid"])
    except FileNotFoundError:
        raise ValueError(f"{out}: no paused run there (no {PAUSED_FILE})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a pause note ({exc})") from None
    try:
        os.kill(pid, RESUME_SIGNAL)
    except ProcessLookupError:
        path.unlink(missing_ok=True)
        raise ValueError(f"{out}: the paused run (pid {pid}) is gone") from None
    done = threading.Event()
    for _ in range(int(timeout_s / 0.05)):
        if _pause_number(path) != note.get("pause"):
            break  # gone, or the next pause's note
        done.wait(0.05)
    else:
        raise ValueError(f"{out}: pid {pid} did not resume within {timeout_s:g} s")
    return f"resumed the run paused at simulated t={note.get('t_s', 0):,.3f} s"


def _pause_number(path: Path) -> object:
    """The ``pause`` number of the note at ``path`` (None when there is none)."""
    try:
        return json.loads(path.read_text()).get("pause")
    except (OSError, ValueError, AttributeError):
        return None
