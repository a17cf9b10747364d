"""One scheduler process's numbered requests, handled in the order it sent them.

Requests that a process has in flight together, on different connections (two threads',
or an event loop's concurrent tasks'), reach the facade in whatever order the kernel lets
them; handled in that order, their effects (which binding commits first, which delete)
would differ from run to run. The runtime numbers each process's requests in the order it
sent them (``X-Timewarp-Seq: <pid>-<nonce>.<n>`` right after the request line,
timewarp/_core/netio.py); each is handled once every earlier one of its process was (a
watch: once it started) or will never be: a request refused on its head or body, broken
off or malformed closes its number as the server gives up on it (``unhandled``).

A number can still stay open for good: a request whose numbered head never reached the
server (the client died mid-write before the header). Its successor is then handled
after ``GAP_TIMEOUT_S`` of wall time anyway — a wall-clock decision, counted
(``gap_causes``) and reported as a non-deterministic advance.
"""

from __future__ import annotations

import re
import sys
import threading
import time as _wall

from .server import Request

SEQ_HEADER = "x-timewarp-seq"
# A request whose predecessor never comes is handled after this long anyway, with a
# warning: better out of order than never.
GAP_TIMEOUT_S = 5.0
# the number in a head h11 could not parse: the runtime puts it right after the request line
_RAW_NUMBER = re.compile(rb"[^\r\n]*\r\n(?i:x-timewarp-seq):[ \t]*([^\r\n]+?)[ \t]*\r\n")


def _parse(value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    who, _, n = value.rpartition(".")
    try:
        return who, int(n)
    except ValueError:
        return None


def seq_key(headers: dict[str, str]) -> tuple[str, int] | None:
    """(the numbering process, the request's number) of a runtime's request, or None."""
    return _parse(headers.get(SEQ_HEADER))


class RequestSequencer:
    """Per process: the next number to handle, and numbers closed ahead of it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next: dict[str, int] = {}
        self._ahead: dict[str, set[int]] = {}  # closed, waiting for those before them
        self.gap_causes: list[str] = []  # requests handled out of order after GAP_TIMEOUT_S

    @staticmethod
    def key(request: Request) -> tuple[str, int] | None:
        """(the numbering process, the request's number), or None: not numbered."""
        return seq_key(request.headers)

    def next_number(self, process: str) -> int:
        """The number of ``process``'s request to be handled next."""
        with self._cond:
            return self._next.get(process, 1)

    def wait_turn(self, key: str, n: int) -> None:
        give_up = None
        with self._cond:
            while self._next.setdefault(key, 1) < n:
                now = _wall.monotonic()
                give_up = give_up or now + GAP_TIMEOUT_S
                if now >= give_up:
                    sys.stderr.write(
                        f"timewarp: facade: request {n} of process {key} waited "
                        f"{GAP_TIMEOUT_S:g} s for its predecessor (request "
                        f"{self._next[key]}); handling it out of order (a non-deterministic "
                        "advance)\n"
                    )
                    self.gap_causes.append(
                        f"request order: request {n} of process {key} handled after "
                        f"{GAP_TIMEOUT_S:g} s of wall time without request {self._next[key]}"
                    )
                    self._next[key] = n
                    if key in self._ahead:
                        self._ahead[key] = {m for m in self._ahead[key] if m > n}
                    break
                self._cond.wait(give_up - now)

    def done(self, key: str, n: int) -> None:
        """Request ``n`` of process ``key`` was handled (or never will be)."""
        with self._cond:
            nxt = self._next.get(key, 1)
            if n < nxt:
                return  # already passed (its successor went ahead after the gap timeout)
            ahead = self._ahead.setdefault(key, set())
            ahead.add(n)
            while nxt in ahead:
                ahead.discard(nxt)
                nxt += 1
            self._next[key] = nxt
            self._cond.notify_all()

    def unhandled(self, headers: dict[str, str] | None, head: bytes) -> None:
        """The server gave up on a request (see ``HttpServer``'s ``on_unhandled``): its
        ``headers`` if they were parsed, else the first bytes it received of it."""
        if headers is not None:
            key = _parse(headers.get(SEQ_HEADER))
        else:
            m = _RAW_NUMBER.match(head)
            key = _parse(m.group(1).decode("latin-1")) if m else None
        if key is not None:
            self.done(*key)
