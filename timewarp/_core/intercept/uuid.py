"""Adjusted at import, when the process has a seed: ``uuid.uuid1`` is made of virtual
time, a clock sequence from the seeded ``random`` and a node from the process's entropy
stream (a random node, multicast bit set, as RFC 4122 allows) instead of the host's MAC
address and the wall clock; ``uuid4`` needs nothing (it reads ``os.urandom``)."""

from __future__ import annotations

import random
import threading
import types

from timewarp._core import entropy
from timewarp._core.intercept.base import Mechanism

_UUID_EPOCH = 0x01B21DD213814000  # 100-ns intervals from 1582-10-15 to 1970-01-01


def _virtualize(uuid: types.ModuleType) -> None:
    stream = entropy.STREAM
    if stream is None:
        return
    from timewarp import vtime  # loaded with the library, not at activation

    host_node = stream.integer(48) | (1 << 40)
    lock = threading.Lock()
    last = [0]

    def uuid1(node: int | None = None, clock_seq: int | None = None):  # type: ignore[no-untyped-def]
        # the standard library's algorithm, on the virtual clock
        with lock:
            timestamp = max(vtime.time_ns() // 100 + _UUID_EPOCH, last[0] + 1)
            last[0] = timestamp
        if clock_seq is None:
            clock_seq = random.getrandbits(14)
        fields = (
            timestamp & 0xFFFFFFFF,
            (timestamp >> 32) & 0xFFFF,
            (timestamp >> 48) & 0x0FFF,
            (clock_seq >> 8) & 0x3F,
            clock_seq & 0xFF,
            host_node if node is None else node,
        )
        return uuid.UUID(fields=fields, version=1)

    uuid.uuid1 = uuid1  # type: ignore[attr-defined]


MECHANISM = Mechanism("uuid", after_import={"uuid": _virtualize})
