"""Waking a thread that sits in ``zmq.Poller.poll`` (a non-blocking pipe it also polls),
and draining what woke it.

Used by the two socket-owning loops (the runtime's clock client and the broker's clock
service): other threads may not touch a ZeroMQ socket, so they queue work and poke."""

from __future__ import annotations

import os
from collections.abc import Iterator

import zmq


class Wakeup:
    def __init__(self) -> None:
        self.fd, self._write_fd = os.pipe()  # poll ``fd`` for POLLIN
        os.set_blocking(self.fd, False)
        os.set_blocking(self._write_fd, False)

    def poke(self) -> None:
        try:
            os.write(self._write_fd, b"\0")
        except BlockingIOError:
            pass  # the pipe is full: the loop is awake anyway

    def drain(self) -> None:
        try:
            os.read(self.fd, 4096)
        except BlockingIOError:
            pass

    def close(self) -> None:
        os.close(self.fd)
        os.close(self._write_fd)


_POLLIN = int(zmq.POLLIN)  # a plain int: `& zmq.POLLIN` builds an enum per call


def drain(sock: zmq.Socket) -> Iterator[bytes]:
    """Every message already queued on ``sock``, without blocking."""
    while sock.get(zmq.EVENTS) & _POLLIN:
        yield sock.recv(zmq.NOBLOCK)


def drain_multipart(sock: zmq.Socket) -> Iterator[list[bytes]]:
    """Like :func:`drain`, one list of frames per message."""
    while sock.get(zmq.EVENTS) & _POLLIN:
        yield sock.recv_multipart(zmq.NOBLOCK)
