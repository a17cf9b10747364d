"""The process's entropy as one deterministic stream, from its seed (``TIMEWARP_SEED``,
which the launcher derives from the run's seed and the process's name).

What the program would read from the operating system (``os.urandom``, ``getrandom``)
is read from this stream instead; so are the seeds of generators seeded from the OS.
The stream is SHA-256 in counter mode over the seed: the same bytes on every machine and
every Python version, in the order the program asks for them (one thread runs at a
time). It is not a cryptographic generator for secrets that matter: in a simulation,
reproducibility is the point. OpenSSL keeps its own generator (TLS keys stay random).
"""

from __future__ import annotations

import _thread
import hashlib
import operator
import os

_BLOCK = 32  # bytes of one SHA-256 output


class Stream:
    """Bytes from ``seed`` (and a label, so that two uses of one seed never share bytes)."""

    def __init__(self, seed: int, label: str) -> None:
        self._key = hashlib.sha256(f"timewarp-entropy\0{seed}\0{label}".encode()).digest()
        self._counter = 0
        self._buffer = b""
        self._lock = _thread.allocate_lock()  # untracked threads may draw too

    def read(self, n: int) -> bytes:
        n = operator.index(n)  # os.urandom's errors: TypeError, then ValueError
        if n < 0:
            raise ValueError("negative argument not allowed")
        with self._lock:
            missing = n - len(self._buffer)
            if missing > 0:
                start = self._counter
                self._counter += -(-missing // _BLOCK)
                blocks = (
                    hashlib.sha256(self._key + i.to_bytes(8, "big")).digest()
                    for i in range(start, self._counter)
                )
                self._buffer += b"".join(blocks)
            out, self._buffer = self._buffer[:n], self._buffer[n:]
            return out

    def integer(self, bits: int) -> int:
        """A non-negative integer of ``bits`` bits from the stream."""
        value = int.from_bytes(self.read((bits + 7) // 8), "big")
        return value >> (-bits % 8)


# The operating system's generator, for the runtime's own needs: whatever the runtime
# draws must not move the program's stream (or the program's draws would depend on,
# say, whether the import hook's cache was warm).
OS_URANDOM = os.urandom

STREAM: Stream | None = None  # the process's stream, once the entropy mechanism is on
