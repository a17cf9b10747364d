"""Adjusted at import, when the process has a seed: numpy's legacy global generator
(``np.random.rand``, ``np.random.choice``...) is seeded from the process's entropy
stream. ``np.random.default_rng()`` and other generators made without a seed need
nothing: numpy draws their ``SeedSequence`` entropy from ``secrets``, which reads the
stream (``intercept/entropy.py``)."""

from __future__ import annotations

import types

from timewarp._core import entropy
from timewarp._core.intercept.base import Mechanism


def _virtualize(np_random: types.ModuleType) -> None:
    stream = entropy.STREAM
    if stream is not None:
        np_random.seed(stream.integer(32))  # the legacy seed's range: 0 .. 2**32 - 1


MECHANISM = Mechanism("numpy", after_import={"numpy.random": _virtualize})
