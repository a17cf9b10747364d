"""Patched at run time, when the broker serves a Kubernetes facade: the sockets the
program opens to it are counted in the byte ledger and read only as far as the broker
allows (``timewarp._core.netio``)."""

from __future__ import annotations

import os

from timewarp._core import runtime as _runtime
from timewarp._core.intercept.base import Mechanism
from timewarp.wire import clockproto


def _patch(_rt: _runtime.Runtime) -> None:
    facade = os.environ.get(clockproto.ENV_FACADE)
    if facade:
        from timewarp._core import netio  # ssl and sockets: only when there is a facade

        netio.install(facade)


MECHANISM = Mechanism("facade sockets", patch=_patch)
