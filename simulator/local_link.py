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
"""

from __future__ import annotations

import threading

from simulator.protocol import Message

SCHEME = "local://"

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
