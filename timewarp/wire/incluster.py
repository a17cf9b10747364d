"""The in-cluster configuration redirect, shared by the broker (which writes the files)
and the runtime (which points the client at them).

``config.load_incluster_config()`` reads ``token``, ``ca.crt`` (and ``namespace``) from
the fixed service-account directory ``/var/run/secrets/kubernetes.io/serviceaccount``,
through the module globals ``SERVICE_TOKEN_FILENAME`` and ``SERVICE_CERT_FILENAME`` of
``kubernetes.config.incluster_config`` (looked up at call time; checked in 24.2.0 and
37.0.2). :func:`redirect_incluster_config` rebinds them in the current process, so the
scheduler's own call finds the broker's files; timewarp's runtime does that at start-up
when ``TIMEWARP_INCLUSTER_DIR`` is set (see ``docs/facade.md``).
"""

from __future__ import annotations

import os
from pathlib import Path

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
INCLUSTER_ENV = "TIMEWARP_INCLUSTER_DIR"


def redirect_incluster_config(directory: str | Path | None = None) -> bool:
    """Make ``kubernetes.config.load_incluster_config()`` read ``directory`` (default:
    ``$TIMEWARP_INCLUSTER_DIR``) instead of the service-account mount. Returns False when
    there is nothing to redirect (no directory, or kubernetes not installed)."""
    directory = directory or os.environ.get(INCLUSTER_ENV)
    if not directory:
        return False
    try:
        from kubernetes.config import incluster_config
    except ImportError:
        return False
    base = Path(directory)
    incluster_config.SERVICE_TOKEN_FILENAME = str(base / "token")
    incluster_config.SERVICE_CERT_FILENAME = str(base / "ca.crt")
    return True
