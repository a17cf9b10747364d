"""The broker's Batsim socket: the ZeroMQ REP socket the simulator connects to.

``timewarp broker`` binds it first thing, before any scheduler starts, and hands the
bound socket to the broker: a port checked free and bound later can be taken in between
(another broker, a decision process of Batsim's, any program that bound port 0 and got
it), which used to end the run as "a bug in timewarp". A taken address is
:class:`EndpointInUse`, a usage error that names it; ``tcp://127.0.0.1:0`` (or ``:*``)
lets the system choose a free port, and the broker says which as it waits.
"""

from __future__ import annotations

import errno
import os

import zmq


class EndpointInUse(OSError):
    """The address is taken: the message names it and what to do."""


def bind_rep(endpoint: str) -> tuple[zmq.Socket, str]:
    """A REP socket bound at ``endpoint`` (port ``0`` or ``*``: a free one) and the
    endpoint it is bound at; :class:`EndpointInUse` when the address is taken, the
    socket closed."""
    sock = zmq.Context.instance().socket(zmq.REP)
    sock.setsockopt(zmq.LINGER, 0)
    base, _, port = endpoint.rpartition(":")
    try:
        if port in ("0", "*"):
            port = str(sock.bind_to_random_port(base))
            return sock, f"{base}:{port}"
        sock.bind(endpoint)
    except zmq.ZMQError as exc:
        sock.close(0)
        if exc.errno == errno.EADDRINUSE:
            raise EndpointInUse(
                errno.EADDRINUSE,
                f"{endpoint}: {os.strerror(errno.EADDRINUSE)} (another broker, or another program, "
                "listens there): stop it, or give another port (PORT 0 picks a free one)",
            ) from None
        raise
    return sock, sock.getsockopt_string(zmq.LAST_ENDPOINT)
