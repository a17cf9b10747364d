"""Patched at run time in every simulated process: a thread waiting only on server
sockets (a listening socket, a connection accepted from one) is idle, its own timeout
virtual (``timewarp._core.servers``). Adjusted at import: ``socketserver``'s
``shutdown()`` waits on a virtual ``Event`` — the server thread sets it at its next
(virtual) poll, which a real wait holding the baton would never let come."""

from __future__ import annotations

import threading
import types

from timewarp._core import runtime as _runtime
from timewarp._core import servers
from timewarp._core.intercept.base import Mechanism
from timewarp._core.shim import ModuleShim


def _patch(_rt: _runtime.Runtime) -> None:
    servers.install()


def _virtualize_socketserver(module: types.ModuleType) -> None:
    from timewarp import vthreading  # loaded with the library, not at activation

    module.threading = ModuleShim(threading, {"Event": vthreading.Event})  # type: ignore[attr-defined]


MECHANISM = Mechanism(
    "server sockets",
    patch=_patch,
    after_import={"socketserver": _virtualize_socketserver},
)
