"""timewarp: run unmodified Python schedulers in simulated time.

This package is the runtime, the lowest layer: what a scheduler process imports.
Patched code imports the drop-ins ``timewarp.vtime``, ``vdatetime``, ``vthreading``,
``vqueue``, ``vsched`` and ``vasyncio``; their machinery is private (``timewarp._core``)
and what the runtime shares with the broker lives in ``timewarp.wire``. The package
imports nothing of ``patcher``, ``simulator``, ``broker`` or the commands (``commands``,
the ``timewarp`` command), which sit above it.

It is also where activation is wired in: the drop-ins find the runtime through
``timewarp._core.current``, which turns it on with the activator set here (the first
import of any drop-in runs this file first), so that the drop-ins and the activation,
which hands them to the standard library, never import each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from timewarp._core import current as _current

if TYPE_CHECKING:
    from timewarp._core.runtime import Runtime

__version__ = "0.1.0"


def _activate_from_env() -> Runtime | None:
    # loaded at the first ask under a broker, never by a process without a clock
    from timewarp._core.activation import activate_from_env

    return activate_from_env()


_current.ACTIVATOR = _activate_from_env
