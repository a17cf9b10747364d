"""The in-cluster configuration redirect, shared by the broker (which writes the files)
and the runtime (which points the client libraries at them).

``load_incluster_config()`` reads ``token`` and ``ca.crt`` from the fixed service-account
directory ``/var/run/secrets/kubernetes.io/serviceaccount``, through the module globals
``SERVICE_TOKEN_FILENAME`` and ``SERVICE_CERT_FILENAME`` of its ``incluster_config``
module, looked up at call time — in the official client
(``kubernetes.config.incluster_config``; checked in 24.2.0 and 37.0.2) and in
``kubernetes_asyncio.config.incluster_config`` (checked in 36.1.0). Rebinding them in the
scheduler's process makes its own call find the broker's files; timewarp's runtime does
that when ``TIMEWARP_INCLUSTER_DIR`` is set, as each library is imported (see
``docs/facade.md``). kopf logs in through whichever of the two clients is installed.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
INCLUSTER_ENV = "TIMEWARP_INCLUSTER_DIR"
# the client libraries' modules that hold the two paths
INCLUSTER_MODULES = (
    "kubernetes.config.incluster_config",
    "kubernetes_asyncio.config.incluster_config",
)


def point_at(module: types.ModuleType, directory: str | Path) -> None:
    """Make ``module`` (an ``incluster_config`` module) read ``directory``."""
    base = Path(directory)
    module.SERVICE_TOKEN_FILENAME = str(base / "token")
    module.SERVICE_CERT_FILENAME = str(base / "ca.crt")


def redirect_hooks(
    directory: str | Path | None = None,
) -> dict[str, Callable[[types.ModuleType], None]]:
    """module name -> the hook that redirects it, for an after-import hook (empty when
    there is no directory)."""
    directory = directory or os.environ.get(INCLUSTER_ENV)
    if not directory:
        return {}
    return {name: (lambda module, d=directory: point_at(module, d)) for name in INCLUSTER_MODULES}


def redirect_incluster_config(directory: str | Path | None = None) -> bool:
    """Redirect every installed client library now (importing it). Returns False when
    there is nothing to redirect (no directory, or no client installed)."""
    done = False
    for name, hook in redirect_hooks(directory).items():
        module = sys.modules.get(name)
        if module is None:
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
        hook(module)
        done = True
    return done
