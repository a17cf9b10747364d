"""Patched at run time in every simulated process: connections to the simulated
cluster's addresses are refused at once (``timewarp._core.podnetwork``)."""

from __future__ import annotations

from timewarp._core import podnetwork
from timewarp._core import runtime as _runtime
from timewarp._core.intercept.base import Mechanism


def _patch(_rt: _runtime.Runtime) -> None:
    podnetwork.install()


MECHANISM = Mechanism("the simulated cluster's addresses", patch=_patch)
