"""Batsim's REQ/REP exchange between two threads of one process, passing
:class:`~simulator.protocol.Message` objects: no JSON, no ZeroMQ.

For ``timewarp simulate`` with the embedded simulator, where both ends are timewarp's
own: each message was encoded, sent over ZeroMQ ``inproc://``, decoded and validated,
only to rebuild the object the other thread already had. Over this link the object
itself goes (a message is never changed once built, by either end), with the same order
and the same one-reply-per-message rule as the socket. The wire path stays for
``--batsim`` and ``timewarp sim`` (their peer is another program); the tests run both
paths on the same scenarios and compare outputs and message logs.

An endpoint is ``local://NAME``: the broker binds it, the simulator's runner connects.

**Hosted**: the simulator's run may also be handed to the broker as the link's
``guest`` (``timewarp simulate`` does): the broker's thread then runs it
(:meth:`LocalLink.host`), and each request is a plain call of the broker's answer — no
thread, no wait, no wake-up between the two (two context switches per message fewer).
Nothing else changes: the runner's loop, the messages and their order are the same; a
failure of the broker's side stops the simulator as ``stop`` would (it writes its partial
outputs), then is raised again in the broker's thread. A stop signal (SIGTERM, Ctrl-C)
that comes while the simulator's own code runs in that thread is held (:data:`SHIELD`)
and raised at the next answer, so that it never lands in the middle of applying a reply.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from simulator.protocol import Message

SCHEME = "local://"


class HostFailed(Exception):
    """The broker's side of a hosted exchange failed: the simulator stops, as on ``stop``;
    the broker raises the cause again once the simulator's run has returned."""


class Shield:
    """Stop signals held while the hosted simulator's own code runs (the main thread's
    signal handler asks :meth:`hold`): raised at the next answer instead, between two
    messages, never while a reply is being applied."""

    def __init__(self) -> None:
        self.active = False
        self._held: BaseException | None = None

    def hold(self, exc: BaseException) -> bool:
        """Whether ``exc`` was held (the simulator's code is running) rather than due now."""
        if not self.active:
            return False
        self._held = exc
        return True

    def take(self) -> BaseException | None:
        held, self._held = self._held, None
        return held


SHIELD = Shield()

_bound: dict[str, LocalLink] = {}
_bound_lock = threading.Lock()


class LocalLink:
    """One request slot and one reply slot under one condition: the simulator puts a
    request and waits for the reply; the broker waits for a request and puts the reply."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._cond = threading.Condition()
        self._request: Message | None = None
        self._reply: Message | None = None
        # hosted: the simulator's whole run, for the broker's thread to call (set by the
        # simulator's side before the broker runs); while it runs, ``handler`` answers
        self.guest: Callable[[], None] | None = None
        self.handler: Callable[[Message], Message] | None = None
        # what stopped the broker's side of a hosted run, as soon as it did (the simulator
        # then ends because of it: its own end is not a failure of its own)
        self.failure: BaseException | None = None

    def host(self, answer: Callable[[Message], Message]) -> BaseException | None:
        """Run the guest in this thread, each of its requests answered by ``answer``.
        Returns what stopped the broker's side (an exception ``answer`` raised, or a stop
        signal held while the simulator's code ran), else None."""
        guest, self.guest = self.guest, None
        if guest is None:
            raise RuntimeError(f"{self.endpoint}: no simulator to host")
        self.failure = None

        def handler(message: Message) -> Message:
            SHIELD.active = False
            try:
                held = SHIELD.take()
                if held is not None:
                    raise held
                return answer(message)
            except BaseException as exc:  # the simulator stops; the cause is the broker's
                self.failure = exc
                raise HostFailed(str(exc)) from None
            finally:
                SHIELD.active = True

        self.handler = handler
        SHIELD.active = True
        try:
            guest()
        finally:
            SHIELD.active = False
            self.handler = None
        return self.failure if self.failure is not None else SHIELD.take()

    # ---------------------------------------------------------------- the simulator's end
    def request(self, message: Message) -> None:
        with self._cond:
            if self._request is not None or self._reply is not None:
                raise RuntimeError(f"{self.endpoint}: a request before the previous reply")
            self._request = message
            self._cond.notify_all()

    def reply(self, timeout: float | None) -> Message | None:
        """The reply to the last request, or ``None`` if none came within ``timeout``."""
        with self._cond:
            if self._reply is None:
                self._cond.wait_for(lambda: self._reply is not None, timeout)
            reply, self._reply = self._reply, None
            return reply

    # ---------------------------------------------------------------- the broker's end
    def poll(self, timeout: float) -> bool:
        """Whether a request is waiting (after waiting up to ``timeout`` seconds)."""
        with self._cond:
            if self._request is None:
                self._cond.wait_for(lambda: self._request is not None, timeout)
            return self._request is not None

    def receive(self) -> Message:
        with self._cond:
            request, self._request = self._request, None
            if request is None:
                raise RuntimeError(f"{self.endpoint}: receive() with no request waiting")
            return request

    def send(self, message: Message) -> None:
        with self._cond:
            self._reply = message
            self._cond.notify_all()


def bind(endpoint: str) -> LocalLink:
    """A new link at ``endpoint`` (``local://NAME``, unused so far)."""
    if not endpoint.startswith(SCHEME):
        raise ValueError(f"not a local endpoint: {endpoint!r}")
    with _bound_lock:
        if endpoint in _bound:
            raise ValueError(f"{endpoint} is already bound")
        link = _bound[endpoint] = LocalLink(endpoint)
        return link


def connect(endpoint: str) -> LocalLink:
    """The link bound at ``endpoint``; a clear error if none is."""
    with _bound_lock:
        link = _bound.get(endpoint)
    if link is None:
        raise ValueError(f"nothing is bound at {endpoint} (the broker binds it first)")
    return link


def unbind(link: LocalLink) -> None:
    with _bound_lock:
        if _bound.get(link.endpoint) is link:
            del _bound[link.endpoint]
