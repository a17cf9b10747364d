"""Standalone mode: run one program under virtual time with no simulator.

Whenever the program is quiescent, time jumps to its next deadline — what Go's
``testing/synctest`` does for goroutines, for a whole Python process. When it is
quiescent with nothing pending while still alive, every thread is asleep for good: a
deadlock, reported with the threads' stacks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time as _wall
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

from broker.clock.service import ClockService, ClockStall
from timewarp.wire import clockproto
from timewarp.wire.stophold import critical

_EXIT_GRACE_S = 2.0
_GONE_GRACE_S = 60.0  # a program that left the clock has this long (wall) to exit


@dataclass
class StandaloneResult:
    returncode: int
    virtual_ns: int
    wall_s: float
    fires: int
    advances: int
    nondeterministic_advances: int
    deadlock: str | None = None


def run_standalone(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    clock: ClockService,
    name: str = "main",
    log: TextIO | None = None,
) -> StandaloneResult:
    """Launch ``argv`` against ``clock`` and drive time until it exits."""
    log = log or sys.stderr
    child_env = dict(env)
    child_env[clockproto.ENV_ENDPOINT] = clock.endpoint
    child_env[clockproto.ENV_NAME] = name
    child_env[clockproto.ENV_BROKER_PID] = str(os.getpid())
    child_env[clockproto.ENV_TOKEN] = clock.expect(name)
    started = _wall.perf_counter()
    exited = threading.Event()
    deadlock = None
    proc = None
    try:
        # started and watched in one critical block (timewarp.wire.stophold), inside the
        # try that passes a stop signal on: one raised just after Popen left it running
        with critical:
            try:
                proc = subprocess.Popen(list(argv), env=child_env)
            except OSError as exc:
                clock.process_gone(name)
                raise FileNotFoundError(
                    f"timewarp run: cannot start {argv[0]!r}: {exc.strerror}"
                ) from exc

            def _reap() -> None:
                code = proc.wait()
                clock.process_gone(name, code)
                exited.set()

            threading.Thread(target=_reap, name="timewarp-reaper", daemon=True).start()
        clock.engage_autopilot()  # the service advances time itself while the program lives
        while not exited.is_set():
            clock.wait_settled()
            if exited.wait(_EXIT_GRACE_S):
                break
            if any(p.gone for p in clock.registry.processes() if p.name == name):
                exited.wait()  # it said bye: the interpreter is winding down, in real time
                break
            if clock.next_deadline() is not None or not clock.quiescent():
                continue
            if not clock.registry.alive():
                # It closed its clock connection: it is exiting (finalizers, a loaded
                # machine), not deadlocked; time cannot matter to it any more.
                if not exited.wait(_GONE_GRACE_S):
                    log.write(
                        f"timewarp: {name!r} left the clock {_GONE_GRACE_S:g} s ago but has "
                        "not exited; killing it\n"
                    )
                    proc.kill()
                    exited.wait(5)
                break
            if any(p.detached for p in clock.registry.alive()):
                continue  # a thread the stall guard let go is still in its real wait
            deadlock = _report_deadlock(clock, name, log)
            proc.kill()
            exited.wait(5)
            break
    except ClockStall:
        proc.kill()
        exited.wait(5)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP raised as one (``signum``)
        if proc is None:
            raise
        proc.send_signal(getattr(exc, "signum", signal.SIGINT))
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    returncode = proc.wait()
    if deadlock is not None and returncode in (0, -signal.SIGKILL):
        returncode = 1
    return StandaloneResult(
        returncode=returncode,
        virtual_ns=clock.now_ns,
        wall_s=_wall.perf_counter() - started,
        fires=clock.fires,
        advances=clock.advances,
        nondeterministic_advances=clock.stall.nondeterministic_advances,
        deadlock=deadlock,
    )


def _report_deadlock(clock: ClockService, name: str, log: TextIO) -> str:
    stacks = clock.stall.collect_stacks(name)
    text = (
        f"timewarp: deadlock at virtual t={clock.now_ns / 1e9:.9f} s: every thread of "
        f"{name!r} is blocked and no timer is pending.\n{stacks}"
    )
    log.write(text + "\n")
    log.flush()
    return text
