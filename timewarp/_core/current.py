"""The process's runtime, if it has one: the one ``Runtime`` (``ACTIVE``) that every
drop-in asks for, turned on at the first ask when the environment names a clock.

This module does not know how the runtime is turned on: the package entry
(``timewarp/__init__.py``) hands it the activator. The drop-ins need the runtime, and
activation needs the drop-ins (its after-import adapters hand them to the standard
library), so neither may import the other; both import this.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from timewarp.wire import clockproto

if TYPE_CHECKING:
    from timewarp._core.runtime import Runtime

ACTIVE: Runtime | None = None  # set by activation, once per process


def _no_activator() -> Runtime | None:
    raise RuntimeError("timewarp._core.current: no activator (timewarp/__init__.py sets it)")


ACTIVATOR: Callable[[], Runtime | None] = _no_activator
_undo: list[Callable[[], None]] = []


def active() -> Runtime | None:
    """The runtime, or None: every drop-in then behaves as the standard library."""
    rt = ACTIVE
    if rt is not None or clockproto.ENV_ENDPOINT not in os.environ:
        return rt
    return ACTIVATOR()


def on_deactivate(undo: Callable[[], None]) -> None:
    """``undo`` runs when the runtime is forgotten (a forked child), latest first."""
    _undo.append(undo)


def deactivate() -> None:
    """Forget the runtime and undo what was patched for it: a forked child cannot share
    its parent's clock connection."""
    global ACTIVE
    ACTIVE = None
    while _undo:
        _undo.pop()()


def seconds_to_ns(secs: object, *, what: str = "timeout") -> int:
    """Virtual durations are integer nanoseconds; reject what the stdlib rejects."""
    if isinstance(secs, bool) or not isinstance(secs, int | float):
        try:
            secs = float(secs)  # Decimal, numpy scalars, ...
        except (TypeError, ValueError):
            raise TypeError(
                f"'{type(secs).__name__}' object cannot be interpreted as an integer or float"
            ) from None
    if isinstance(secs, float) and (math.isnan(secs) or math.isinf(secs)):
        if math.isinf(secs) and secs > 0:
            return 2**62
        raise ValueError(f"Invalid value {secs!r} for {what}")
    return int(round(secs * 1_000_000_000))
