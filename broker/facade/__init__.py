"""The Kubernetes API facade: enough of kube-apiserver for the official client.

Public surface (everything else is internal):

- ``Facade`` — store + HTTP(S) server + tokens + metrics; quiescence ledger;
- ``Store`` — thread-safe objects with resourceVersions and watch history;
- ``Hooks``, ``ApiError`` — cluster policy plugged in by the broker;
- ``Clock``, ``ManualClock`` — the virtual clock the facade is given;
- ``write_kubeconfig``, ``redirect_incluster_config`` — client configuration.
"""

from .api import Hooks
from .clock import Cancellable, Clock, ManualClock
from .errors import ApiError
from .facade import Facade
from .kubeconfig import redirect_incluster_config, write_kubeconfig
from .store import Store

__all__ = [
    "ApiError",
    "Cancellable",
    "Clock",
    "Facade",
    "Hooks",
    "ManualClock",
    "Store",
    "redirect_incluster_config",
    "write_kubeconfig",
]
