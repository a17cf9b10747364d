"""Stopping a command from outside without losing what it made.

The first SIGINT (Ctrl-C), SIGTERM or SIGHUP raises :class:`Interrupted` in the main
thread, so the work in progress unwinds to its clean-up; every later one — a second
Ctrl-C, or the copy ``timeout`` and terminals send to the whole process group — is only
noted (once, on stderr): clean-up runs to its end, outputs are written, temporary
folders removed. :meth:`StopSignals.shield` makes the first signal noted too, for the
stretch where there is nothing left to unwind (the clean-up itself). The exit status is
the shell's convention for the first signal: 128 + its number (130 for SIGINT, 143 for
SIGTERM, 129 for SIGHUP).

``timewarp`` installs them first thing, for every command and for the command's whole
life (``commands.cli``): a signal during the imports, the input checks or the last
lines is handled as one during the run — never the default action that kills the
process before its clean-up. A command's own ``with StopSignals(...)`` inside it is the
same state (nested: nothing installed twice), re-armed if no signal came yet: after a
run's clean-up shielded it, the next run of the command (``--check-determinism``) can be
stopped again — and one noted between the two runs stops the second as it begins. What the command shielded stays shielded when its block ends: a signal
after a run's manifest is written is noted and leaves the exit status as the manifest
says.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import FrameType, TracebackType

from simulator import local_link
from timewarp.wire import stophold

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """Raised by the first stop signal; ``signum`` says which."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_status(signum: int) -> int:
    return 128 + signum


class StopSignals:
    """A context manager for the stop signals (see the module docstring). Outside the
    main thread (tests driving a command in a thread) it installs nothing. Inside
    another one (the CLI's) it shares that one's state."""

    def __init__(self, prog: str) -> None:
        self.prog = prog
        self.received: list[int] = []
        self._raised = False
        self._told = False
        self._previous: dict[int, object] = {}
        self._outer: StopSignals | None = None

    def __enter__(self) -> StopSignals:
        global _installed
        if threading.current_thread() is threading.main_thread():
            if _installed is not None:
                self._outer = _installed
                self.received = _installed.received  # one list: what either was sent
                if self.received:  # noted while nothing could be unwound (between two
                    # runs of --check-determinism): the stop asked for comes now, before
                    # this block begins anything
                    raise Interrupted(self.received[0])
                _installed._raised = False  # armed again (a shielded earlier run is over)
                return self
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
            _installed = self
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global _installed
        if self._outer is not None:
            self._outer = None
            return
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        if self._previous:
            _installed = None
        self._previous.clear()

    def keep_noting(self) -> None:
        """Shielded, and left installed when the block ends: the process is ending (the
        interpreter's shut-down still runs Python code; a signal then must not kill it
        with the default action nor raise). ``commands.cli.entry`` only."""
        self.shield()
        self._previous.clear()

    def shield(self) -> None:
        """From now on every stop signal is noted, none raised."""
        (self._outer or self)._raised = True

    @property
    def interrupted(self) -> bool:
        return bool(self.received)

    @property
    def exit_code(self) -> int | None:
        """128 + the first signal, or None if none came."""
        return exit_status(self.received[0]) if self.received else None

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        if not self._raised:
            self._raised = True
            interrupted = Interrupted(signum)
            # held till the end of a critical block (timewarp.wire.stophold), or till the
            # hosted simulator's code hands over (simulator.local_link)
            if stophold.hold(interrupted) or local_link.SHIELD.hold(interrupted):
                return
            raise interrupted
        if not self._told:
            self._told = True
            name = signal.Signals(signum).name
            text = f"{self.prog}: {name} noted; finishing the clean-up so that no output is lost\n"
            # os.write, not print: a handler that wrote through sys.stderr's buffer while
            # the main thread was writing there would raise "reentrant call"
            with contextlib.suppress(OSError):
                os.write(2, text.encode())


def current() -> StopSignals | None:
    """The stop signals installed in this process (the CLI's), if any."""
    return _installed


_installed: StopSignals | None = None
