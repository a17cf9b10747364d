"""A set of job ids that only grows, at about one bit per id when ids are dense.

Batsim's job ids are ``<workload>!<local id>`` and local ids are mostly the integers
1, 2, 3… of the workload file: a run remembers every job that ended (so that a later
decision naming one gets Batsim's answer, and an id is never reused), and a ``set`` of
strings costs ~130 bytes per id — memory that grows with every job that ever ran.
:class:`JobIdSet` keeps such ids as bits of one ``bytearray`` per workload; any other id
(not a canonical decimal, or one far beyond the ids seen so far) goes to a plain set.
"""

from __future__ import annotations

from collections.abc import Iterable

#: a bitmap may always grow to this many bytes; beyond, only while it holds at least one
#: id per ``_BYTES_PER_ID`` bytes (so that sparse ids cannot blow it up)
_FREE_BYTES = 64 * 1024
_BYTES_PER_ID = 8


def _split(job_id: str) -> tuple[str, int] | None:
    """``("w0", 12)`` for ``"w0!12"``; None for an id without a canonical decimal part."""
    prefix, bang, local = job_id.rpartition("!")
    if not bang or not local.isascii() or not local.isdigit():
        return None
    if len(local) > 1 and local[0] == "0":  # "012" is not "12"
        return None
    return prefix, int(local)


class JobIdSet:
    """``add`` and ``in`` as a set of ``str``; memory flat in a dense id range."""

    __slots__ = ("_bits", "_counts", "_others")

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._bits: dict[str, bytearray] = {}  # workload -> bit n set: "<workload>!n" in
        self._counts: dict[str, int] = {}  # workload -> ids in its bitmap
        self._others: set[str] = set()
        for job_id in ids:
            self.add(job_id)

    def add(self, job_id: str) -> None:
        split = _split(job_id)
        if split is None or job_id in self._others:
            self._others.add(job_id)
            return
        prefix, number = split
        bits = self._bits.get(prefix)
        if bits is None:
            bits = self._bits[prefix] = bytearray()
            self._counts[prefix] = 0
        byte, mask = number >> 3, 1 << (number & 7)
        if byte >= len(bits):
            if byte >= max(_FREE_BYTES, _BYTES_PER_ID * (self._counts[prefix] + 1)):
                self._others.add(job_id)  # too far out for the bitmap
                return
            bits.extend(bytes(byte + 1 - len(bits)))
        if not bits[byte] & mask:
            bits[byte] |= mask
            self._counts[prefix] += 1

    def __contains__(self, job_id: object) -> bool:
        if not isinstance(job_id, str):
            return False
        split = _split(job_id)
        if split is not None:
            bits = self._bits.get(split[0])
            byte = split[1] >> 3
            if bits is not None and byte < len(bits) and bits[byte] & (1 << (split[1] & 7)):
                return True
        return job_id in self._others

    def __len__(self) -> int:
        return sum(self._counts.values()) + len(self._others)

    def nbytes(self) -> int:
        """Bytes its bitmaps hold (the ids outside them excluded): what a dense range costs."""
        return sum(len(bits) for bits in self._bits.values())
