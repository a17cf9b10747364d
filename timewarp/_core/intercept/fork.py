"""Patched at run time: a forked child cannot share its parent's clock connection, so
it forgets the runtime and runs in real time (``current.deactivate`` undoes the other
patches)."""

from __future__ import annotations

import os

from timewarp._core import current
from timewarp._core import runtime as _runtime
from timewarp._core.intercept.base import Mechanism


def _patch(_rt: _runtime.Runtime) -> None:
    os.register_at_fork(after_in_child=current.deactivate)


MECHANISM = Mechanism("fork", patch=_patch)
