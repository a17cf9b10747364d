"""Patched at run time for a process the broker runs in-cluster (``--incluster``,
``TIMEWARP_INCLUSTER_DIR`` set): the client libraries' in-cluster loaders pointed at the
process's service-account files, as each library is imported
(``timewarp/wire/incluster.py``), and what a pod sees itself — the files at their literal
path, ``kubernetes.default.svc`` resolving to the API (``timewarp._core.podidentity``)."""

from __future__ import annotations

import os

from timewarp._core import runtime as _runtime
from timewarp._core.intercept.base import Mechanism, when_imported
from timewarp.wire import clockproto
from timewarp.wire import incluster as _incluster


def _patch(_rt: _runtime.Runtime) -> None:
    directory = os.environ.get(_incluster.INCLUSTER_ENV)
    if not directory:
        return
    from timewarp._core import podidentity

    when_imported(_incluster.redirect_hooks(directory))
    podidentity.install(
        directory, podidentity.facade_from_env(os.environ.get(clockproto.ENV_FACADE))
    )


MECHANISM = Mechanism("in-cluster identity", patch=_patch)
