"""``Endpoint``: the facade's address and credentials, ready before the facade itself.

A scheduler needs only these (a kubeconfig or in-cluster files naming ``host:port`` and
its token) to start, and its start-up — importing a Kubernetes client — is the longest
part of a short simulation. So ``timewarp simulate`` binds the listening socket and
writes the files first, starts the schedulers, and only then imports and builds the
``Facade`` on this endpoint: a scheduler that connects early waits in the socket's
backlog. This module imports nothing heavy (no HTTP server, store, PyYAML).
"""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .auth import TokenRegistry, TokenStats
from .kubeconfig import incluster_env, write_incluster_files, write_kubeconfig

if TYPE_CHECKING:
    from .tls import TlsFiles


class Endpoint:
    """A listening socket on ``host:port`` (0 = a free port), the bearer tokens, and
    with ``tls=True`` a fresh CA and server certificate (``tls_files``): HTTPS only.
    Without it the port serves plain HTTP to the schedulers, and HTTPS as well once
    :meth:`enable_https` made the files (the observer's kubeconfig is HTTPS: kubectl
    sends no bearer token over plain HTTP)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        tls_dir: str | Path | None = None,
    ) -> None:
        self.tokens = TokenRegistry()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.tls_files: TlsFiles | None = None
        self.tls_only = tls
        self._tls_dir = tls_dir
        self._host_given = host
        if tls:
            self.enable_https()
        try:
            self.listener = socket.create_server((host, port))
        except OSError as exc:  # a port given and taken: say which, and leave no TLS files
            if self._tmp is not None:
                self._tmp.cleanup()
            raise OSError(
                exc.errno, f"the API facade's address {host}:{port}: {exc.strerror or exc}"
            ) from None
        self.host: str
        self.port: int
        self.host, self.port = self.listener.getsockname()[:2]

    def enable_https(self) -> None:
        """Make the CA and server certificate (once); before the Facade is built."""
        if self.tls_files is not None:
            return
        from .tls import generate  # cryptography: ~0.2 s to import, only for HTTPS

        tls_dir = self._tls_dir
        if tls_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="timewarp-facade-tls-")
            tls_dir = self._tmp.name
        self.tls_files = generate(tls_dir, hosts=(self._host_given, "localhost"))

    @property
    def url(self) -> str:
        """The schedulers' URL: HTTPS only with ``tls=True``."""
        scheme = "https" if self.tls_only else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def https_url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def close(self) -> None:
        """Close the socket (if no server took it) and remove the TLS files."""
        self.listener.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def add_token(self, name: str, token: str | None = None) -> str:
        """A bearer token for the scheduler process ``name`` (same name, same token)."""
        return self.tokens.add(name, token)

    def token_stats(self, name: str) -> TokenStats:
        return self.tokens.stats(name)

    def write_kubeconfig(self, path: str | Path, name: str, *, namespace: str = "default") -> Path:
        """A kubeconfig for process ``name`` (registering its token if new)."""
        ca = self.tls_files.ca_cert if self.tls_files and self.tls_only else None
        return write_kubeconfig(
            path, self.url, self.add_token(name), ca_file=ca, namespace=namespace
        )

    def write_observer_kubeconfig(self, path: str | Path) -> Path:
        """The people's kubeconfig (kubectl, dashboards, load generators): HTTPS with the
        run's CA and the observer's token — read-only, never charged, never ordered
        (``identity.py``). Makes the HTTPS files if needed."""
        self.enable_https()
        assert self.tls_files is not None
        return write_kubeconfig(
            path,
            self.https_url,
            self.tokens.observer_token(),
            ca_file=self.tls_files.ca_cert,
            user="observer",
        )

    def write_cert_kubeconfig(
        self, path: str | Path, user: str, groups: tuple[str, ...] = ()
    ) -> Path:
        """A kubeconfig authenticating with a client certificate the run's CA issues for
        ``user`` in ``groups`` (CN and O of its subject), as kind and kubeadm write them."""
        from .clientcert import issue

        self.enable_https()
        assert self.tls_files is not None
        return write_kubeconfig(
            path,
            self.https_url,
            None,
            ca_file=self.tls_files.ca_cert,
            client_cert=issue(self.tls_files, user, groups),
            user=user,
        )

    def write_incluster(
        self, directory: str | Path, name: str, *, namespace: str = "default"
    ) -> dict[str, str]:
        """Service-account files for process ``name`` in ``directory``; returns the
        environment (``KUBERNETES_SERVICE_HOST``/``PORT``, ``TIMEWARP_INCLUSTER_DIR``).
        Needs ``tls=True``: ``load_incluster_config`` always uses HTTPS."""
        if self.tls_files is None:
            raise ValueError(
                "in-cluster configuration needs HTTPS: create the Facade with tls=True"
            )
        write_incluster_files(
            directory,
            self.add_token(name),
            self.tls_files.ca_cert.read_bytes(),
            namespace=namespace,
        )
        return incluster_env(self.host, self.port, directory)
