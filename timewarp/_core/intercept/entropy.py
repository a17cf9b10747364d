"""Patched at run time, when the process has a seed (``TIMEWARP_SEED``): what it would
read from the operating system comes from its deterministic stream
(``timewarp._core.entropy``) — ``os.urandom``, ``os.getrandom``, ``random``'s own
``_urandom`` (``random.SystemRandom``, ``secrets``), hence ``uuid.uuid4`` — and every
``random.Random`` seeded from the OS (``Random()``, ``random.seed()``) is seeded from the
stream; the global generator is reseeded from it now, as ``random`` seeds it at import.
"""

from __future__ import annotations

import os
import random

from timewarp._core import current, entropy
from timewarp._core import runtime as _runtime
from timewarp._core.intercept.base import Mechanism
from timewarp.wire import clockproto

_SEED_BITS = 256  # as much as a seed from the OS carries that matters (CPython reads more)


def _patch(_rt: _runtime.Runtime) -> None:
    text = os.environ.get(clockproto.ENV_SEED)
    if not text:
        return  # launched by hand without a seed: the OS's entropy, as before
    stream = entropy.Stream(int(text), "os")
    entropy.STREAM = stream

    def urandom(size: int, /) -> bytes:
        return stream.read(size)

    def getrandom(size: int, flags: int = 0) -> bytes:
        return stream.read(size)

    orig_seed = random.Random.seed

    def seed(self: random.Random, a: object = None, version: int = 2) -> None:
        if a is None:
            a = stream.integer(_SEED_BITS)
        orig_seed(self, a, version)

    saved = {
        (os, "urandom"): os.urandom,
        (random, "_urandom"): random._urandom,  # type: ignore[attr-defined]
        (random.Random, "seed"): orig_seed,
        (random, "seed"): random.seed,
    }
    os.urandom = urandom
    random._urandom = urandom  # type: ignore[attr-defined]
    random.Random.seed = seed  # type: ignore[method-assign]
    if hasattr(os, "getrandom"):
        saved[(os, "getrandom")] = os.getrandom
        os.getrandom = getrandom
    # random.seed is the global generator's method, bound at import: bind it again
    random.seed = random._inst.seed  # type: ignore[attr-defined]
    random.seed()  # the global generator, seeded from the OS when random was imported

    def restore() -> None:
        entropy.STREAM = None
        for (owner, name), value in saved.items():
            setattr(owner, name, value)

    current.on_deactivate(restore)


MECHANISM = Mechanism("entropy", patch=_patch)
