"""The Kubernetes API facade: enough of kube-apiserver for the official client.

Public surface (everything else is internal):

- ``Facade`` — store + HTTP(S) server + tokens + metrics; quiescence ledger;
- ``Endpoint`` — the facade's bound socket, tokens and client files, made before the
  facade (so schedulers can start while the rest is imported);
- ``Store`` — thread-safe objects with resourceVersions and watch history;
- ``Hooks``, ``ApiError`` — cluster policy plugged in by the broker;
- ``Clock``, ``ManualClock`` — the virtual clock the facade is given;
- ``write_kubeconfig``, ``redirect_incluster_config`` — client configuration.

Names are imported on first use: ``from broker.facade.endpoint import Endpoint`` must
not pay for the HTTP server and the store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "ApiError": ".errors",
    "Cancellable": ".clock",
    "Clock": ".clock",
    "Endpoint": ".endpoint",
    "Facade": ".facade",
    "Hooks": ".api",
    "ManualClock": ".clock",
    "Store": ".store",
    "redirect_incluster_config": ".kubeconfig",
    "write_kubeconfig": ".kubeconfig",
}

__all__ = [
    "ApiError",
    "Cancellable",
    "Clock",
    "Endpoint",
    "Facade",
    "Hooks",
    "ManualClock",
    "Store",
    "redirect_incluster_config",
    "write_kubeconfig",
]

if TYPE_CHECKING:
    from .api import Hooks
    from .clock import Cancellable, Clock, ManualClock
    from .endpoint import Endpoint
    from .errors import ApiError
    from .facade import Facade
    from .kubeconfig import redirect_incluster_config, write_kubeconfig
    from .store import Store


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
