"""Waking a thread that sits in ``poll``/``select`` (a non-blocking pipe it also polls).

Used by the two socket-reading loops (the runtime's clock client and the broker's clock
service): other threads queue work for them and poke."""

from __future__ import annotations

import os


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
