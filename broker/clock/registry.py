"""The clock service's processes: who is expected, who said hello, the token each must
present, and what the broker knows of each one's state.

A launcher announces a process (:meth:`Registry.expect`) with the token it hands it; the
process's runtime presents that token in its ``hello``. Methods ending in ``_locked`` are
called with the clock service's lock held; the others take it.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from dataclasses import dataclass, field

from timewarp.wire import clockproto


@dataclass(eq=False)
class ProcessState:
    name: str
    identity: bytes | None = None
    pid: int | None = None
    busy: bool = True
    ack: int = 0
    sent: int = 0  # fire/time messages sent, to be acknowledged
    io: list[list[int]] = field(default_factory=list)
    runnable: int = 0
    blocked: int = 0
    detached: int = 0
    settled: bool = False  # has been idle at least once (start-up is over)
    gone: bool = False
    said_bye: bool = False  # gone by its own word (exiting), not a dropped connection
    gone_at_ns: int | None = None  # the virtual instant it went (its exit's instant)
    returncode: int | None = None
    stacks: str | None = None
    figures: dict | None = None  # its answer to "report": the runtime's cost (figures only)

    @property
    def connected(self) -> bool:
        return self.identity is not None


class Registry:
    """The processes by name and by connection, and their tokens."""

    def __init__(self, cond: threading.Condition) -> None:
        self._cond = cond
        self.procs: dict[str, ProcessState] = {}
        self.by_identity: dict[bytes, ProcessState] = {}
        # name -> token: a process proves it is the one its launcher started (see expect)
        self._tokens: dict[str, str] = {}
        self.refused_hellos = 0

    def expect(self, name: str, token: str | None = None) -> str:
        """A launcher is about to start process ``name``: not quiescent until it connects.
        Returns the token the process must present in its hello (``ENV_TOKEN``): ``token``
        (the launcher passes the process's facade bearer token: one credential per
        process) or a fresh random one. A hello without the token of its name is refused,
        on any endpoint."""
        with self._cond:
            self.procs[name] = ProcessState(name)
        return self.add_token(name, token)

    def add_token(self, name: str, token: str | None = None) -> str:
        """Register (or look up) the token process ``name`` must present in its hello."""
        with self._cond:
            self._tokens[name] = token or self._tokens.get(name) or secrets.token_urlsafe(24)
            return self._tokens[name]

    def joined(self, name: str) -> bool:
        """Process ``name`` connected to the clock at some point."""
        with self._cond:
            proc = self.procs.get(name)
            return proc is not None and proc.connected

    def never_joined(self, name: str) -> bool:
        """Process ``name`` was launched (``expect``) and has neither connected nor gone."""
        with self._cond:
            proc = self.procs.get(name)
            return proc is not None and not proc.connected and not proc.gone

    def processes(self) -> list[ProcessState]:
        with self._cond:
            return list(self.procs.values())

    def alive(self) -> list[ProcessState]:
        with self._cond:
            return [p for p in self.procs.values() if not p.gone]

    def process_of_pid(self, pid: int) -> str | None:
        """The name of the connected, living process whose runtime said hello as ``pid``
        (the facade attributes API requests by it: ``broker/facade/identity.py``)."""
        with self._cond:
            for proc in self.procs.values():
                if proc.pid == pid and proc.connected and not proc.gone:
                    return proc.name
        return None

    def refusal_locked(self, msg: dict) -> str | None:
        """Why a hello is refused (None: accepted). Every process the run started was
        registered with its token (:meth:`expect`), on a Unix socket as on TCP: a name
        nobody registered, a missing token or a wrong one is refused — a stranger must not
        be awaited, nor blamed in a stall report under a name of its choosing."""
        name, token = msg["name"], msg.get("token")
        expected = self._tokens.get(name)
        if expected is None:
            return f"clock hello from {name!r}: no process of that name was started: refused"
        if token is None:
            return (
                f"clock hello from {name!r} without the token its launcher gave it "
                f"({clockproto.ENV_TOKEN}): refused"
            )
        if not hmac.compare_digest(token.encode(), expected.encode()):
            return f"clock hello from {name!r} with a wrong token: refused"
        if msg["v"] != clockproto.VERSION:  # a stale runtime: its frames would not parse
            return (
                f"clock hello from {name!r} speaks clock protocol v{msg['v']}, this broker "
                f"v{clockproto.VERSION} (the runtime and the broker must come from one "
                "installation): refused"
            )
        return None

    def admit_locked(self, identity: bytes, msg: dict) -> ProcessState:
        """An accepted hello: the process it names (``name#2``… when that name is taken
        by a connected or departed process), now connected on ``identity``."""
        name = msg["name"]
        proc = self.procs.get(name)
        if proc is not None and (proc.connected or proc.gone):
            n = 2
            while f"{name}#{n}" in self.procs:
                n += 1
            name = f"{name}#{n}"
            proc = None
        if proc is None:
            proc = ProcessState(name)
            self.procs[name] = proc
        proc.identity = identity
        proc.pid = msg["pid"]
        proc.busy = True
        self.by_identity[identity] = proc
        return proc
