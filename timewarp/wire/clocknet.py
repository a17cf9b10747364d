"""The sockets the clock protocol runs on (:mod:`timewarp.clockproto` says what goes on
them): ``ipc:///path`` (a Unix domain socket, the default: one machine) or
``tcp://host:port``.

Plain stream sockets: a message written by one side's thread is read by the other side's
thread, with no I/O thread of a messaging library in between (ZeroMQ cost four thread
hand-offs per round trip, and a simulation is a long chain of round trips).
"""

from __future__ import annotations

import os
import socket
import stat
import time

_SCHEMES = "ipc:///path or tcp://host:port"


def parse(endpoint: str) -> tuple[socket.AddressFamily, str | tuple[str, int]]:
    """(family, address) of an endpoint; a tcp port of ``*`` means any free port (0)."""
    if endpoint.startswith("ipc://"):
        path = endpoint[len("ipc://") :]
        if not path:
            raise ValueError(f"clock endpoint {endpoint!r}: no socket path")
        return socket.AF_UNIX, path
    if endpoint.startswith("tcp://"):
        host, sep, port = endpoint[len("tcp://") :].rpartition(":")
        if not sep or not host:
            raise ValueError(f"clock endpoint {endpoint!r}: expected tcp://host:port")
        if port == "*":
            return socket.AF_INET, (host, 0)
        try:
            number = int(port)
        except ValueError:
            raise ValueError(f"clock endpoint {endpoint!r}: bad port {port!r}") from None
        return socket.AF_INET, (host, number)
    raise ValueError(f"clock endpoint must be {_SCHEMES}, got {endpoint!r}")


def listen(endpoint: str) -> tuple[socket.socket, str]:
    """A listening socket on ``endpoint`` and the endpoint clients connect to (the port
    chosen for ``tcp://host:*``). A stale Unix socket file at the path is replaced."""
    family, address = parse(endpoint)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if family == socket.AF_UNIX:
            assert isinstance(address, str)
            try:
                if stat.S_ISSOCK(os.stat(address).st_mode):
                    os.unlink(address)
            except FileNotFoundError:
                pass
            sock.bind(address)
            actual = endpoint
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            host, port = sock.getsockname()[:2]
            actual = f"tcp://{host}:{port}"
        sock.listen(64)
    except BaseException:
        sock.close()
        raise
    return sock, actual


def tune(sock: socket.socket) -> None:
    """Small messages both ways: no Nagle delay on TCP."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def connect(endpoint: str, timeout_s: float) -> socket.socket:
    """A connected, blocking socket; retries while nobody listens yet, for up to
    ``timeout_s`` (then raises the last ``OSError``)."""
    family, address = parse(endpoint)
    give_up = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(0.05, give_up - time.monotonic()))
            sock.connect(address)
            sock.settimeout(None)
        except OSError:
            sock.close()
            if time.monotonic() + delay >= give_up:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
            continue
        tune(sock)
        return sock


def unlink(endpoint: str) -> None:
    """Remove an ``ipc://`` endpoint's socket file (nothing for tcp)."""
    if endpoint.startswith("ipc://"):
        try:
            os.unlink(endpoint[len("ipc://") :])
        except OSError:
            pass
