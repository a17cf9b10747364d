"""Client configuration files pointing the official client at the facade.

Two styles, both used unmodified by schedulers:

- a kubeconfig (``config.load_kube_config()`` with ``KUBECONFIG=<path>``), one bearer
  token per scheduler process;
- in-cluster files (``config.load_incluster_config()``): ``token``, ``ca.crt`` and
  ``namespace`` in a directory, plus ``KUBERNETES_SERVICE_HOST``/``_PORT``. The client
  reads the files from the fixed directory ``/var/run/secrets/kubernetes.io/serviceaccount``
  through the module globals ``SERVICE_TOKEN_FILENAME`` and ``SERVICE_CERT_FILENAME`` of
  ``kubernetes.config.incluster_config`` (looked up at call time; checked in 24.2.0 and
  37.0.2); ``timewarp.wire.incluster.redirect_incluster_config`` rebinds them in the
  scheduler's process at start-up when ``TIMEWARP_INCLUSTER_DIR`` is set (see
  ``docs/facade.md``).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from timewarp.wire.incluster import (  # noqa: F401 (re-exported)
    INCLUSTER_ENV,
    SERVICE_ACCOUNT_DIR,
    redirect_incluster_config,
)


def _write_private(path: Path, text: str) -> None:
    """Write atomically (tmp + rename) so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:  # a full disk, a signal: no half-written file left behind
        tmp.unlink(missing_ok=True)
        raise


def write_kubeconfig(
    path: str | Path,
    server_url: str,
    token: str | None,
    *,
    ca_file: str | Path | None = None,
    client_cert: tuple[bytes, bytes] | None = None,
    user: str = "scheduler",
    namespace: str = "default",
    context: str = "timewarp",
) -> Path:
    """Write a kubeconfig with one cluster, one user (bearer ``token``, and/or
    ``client_cert``: certificate and key PEM, embedded as ``client-*-data``), one context.

    The YAML is written by hand (every value a double-quoted scalar, which is also JSON):
    the file is needed before a scheduler starts, and importing PyYAML first would delay
    it."""
    q = json.dumps
    lines = [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        f"- name: {q(context)}",
        "  cluster:",
        f"    server: {q(server_url)}",
    ]
    if ca_file is not None:
        lines.append(f"    certificate-authority: {q(str(Path(ca_file).resolve()))}")
    lines += [
        "users:",
        f"- name: {q(user)}",
        "  user:" if token or client_cert else "  user: {}",
    ]
    if token:
        lines.append(f"    token: {q(token)}")
    if client_cert is not None:
        cert, key = (base64.b64encode(pem).decode() for pem in client_cert)
        lines += [f"    client-certificate-data: {q(cert)}", f"    client-key-data: {q(key)}"]
    lines += [
        "contexts:",
        f"- name: {q(context)}",
        "  context:",
        f"    cluster: {q(context)}",
        f"    user: {q(user)}",
        f"    namespace: {q(namespace)}",
        f"current-context: {q(context)}",
        "preferences: {}",
    ]
    path = Path(path)
    _write_private(path, "\n".join(lines) + "\n")
    return path


def write_incluster_files(
    directory: str | Path, token: str, ca_pem: bytes, *, namespace: str = "default"
) -> Path:
    """Write ``token``, ``ca.crt``, ``namespace`` as a service account volume holds them."""
    directory = Path(directory)
    _write_private(directory / "token", token)
    _write_private(directory / "ca.crt", ca_pem.decode())
    _write_private(directory / "namespace", namespace)
    return directory


def incluster_env(host: str, port: int, directory: str | Path) -> dict[str, str]:
    """Environment for a scheduler process using ``load_incluster_config()``: the
    ``kubernetes`` Service's variables as the kubelet sets them in every pod (the
    ``*_SERVICE_*`` pair and the Docker-style service links), with the facade's address.

    One difference from a real pod: the port is the facade's, not 443, so that a client
    connecting to ``$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`` reaches it (the
    link variables keep their ``443`` names, as programs look them up by name)."""
    url = f"tcp://{host}:{port}"
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": str(port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
        "KUBERNETES_PORT": url,
        "KUBERNETES_PORT_443_TCP": url,
        "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": str(port),
        "KUBERNETES_PORT_443_TCP_ADDR": host,
        INCLUSTER_ENV: str(Path(directory).resolve()),
    }
