"""What a pod sees of its own identity, for a process the broker runs in-cluster
(``--incluster``): the service-account files at their literal path, and the API server
under its in-cluster DNS names.

Files. A real pod has its service account mounted at
``/var/run/secrets/kubernetes.io/serviceaccount`` (``token``, ``ca.crt``, ``namespace``).
Programs read them with ``open()``, ``pathlib``, ``os.path.exists``, or give the path to
``ssl`` (``requests``' ``verify=``, ``InClusterConfigLoader``). The broker writes the
process's files elsewhere (``TIMEWARP_INCLUSTER_DIR``); here every path under the
service-account prefix is redirected there, in ``open``/``io.open``/``os.open``,
``os.stat``/``lstat``/``access``/``listdir``/``scandir`` (so ``os.path`` and ``pathlib``
follow) and ``ssl.SSLContext.load_verify_locations``/``load_cert_chain``. No root is
needed and nothing of the real filesystem is touched; a write under the prefix fails as
it does on the read-only volume of a real pod.

Names. ``kubernetes``, ``kubernetes.default``, ``kubernetes.default.svc`` and
``kubernetes.default.svc.cluster.local`` resolve (``socket.getaddrinfo``,
``gethostbyname``; asyncio resolves through ``getaddrinfo`` too) to the facade's address,
whatever port is asked (443 by default, as the ``kubernetes`` Service's): a connection to
``https://kubernetes.default.svc`` reaches the facade, whose certificate names these
hosts. Limits: C code that resolves or opens on its own (a C extension's resolver, a
subprocess such as ``curl``) does not see either redirect.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import socket
import ssl
from collections.abc import Callable
from typing import Any

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
API_HOSTS = frozenset(
    {
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    }
)

_target_dir = ""
_facade: tuple[str, int] | None = None
_installed = False


def redirected(path: Any) -> Any:
    """``path`` with the service-account prefix replaced by the process's own folder; any
    other path (or a file descriptor) as it is."""
    if isinstance(path, int) or not _target_dir:
        return path
    try:
        text = os.fspath(path)
    except TypeError:
        return path
    is_bytes = isinstance(text, bytes)
    s = os.fsdecode(text) if is_bytes else text
    if s == SERVICE_ACCOUNT_DIR or s.startswith(SERVICE_ACCOUNT_DIR + "/"):
        s = _target_dir + s[len(SERVICE_ACCOUNT_DIR) :]
        return os.fsencode(s) if is_bytes else s
    return path


def _wrap_path_first(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(redirected(path), *args, **kwargs)

    wrapper.__name__ = getattr(fn, "__name__", "wrapper")
    wrapper.__qualname__ = getattr(fn, "__qualname__", wrapper.__name__)
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def _api_host(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    return isinstance(host, str) and host.rstrip(".").lower() in API_HOSTS


def _read_only(path: Any) -> OSError:
    return OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(os.fspath(path)))


def _patch_files() -> None:
    real_open = io.open
    real_os_open = os.open
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def tw_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        target = redirected(file)
        if target is not file and any(c in mode for c in "wax+"):
            raise _read_only(file)  # the service-account volume is read-only
        return real_open(target, mode, *args, **kwargs)

    def tw_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        target = redirected(path)
        if target is not path and flags & writing:
            raise _read_only(path)
        return real_os_open(target, flags, *args, **kwargs)

    tw_open.__doc__ = real_open.__doc__
    builtins.open = tw_open
    io.open = tw_open
    os.open = tw_os_open
    for name in ("stat", "lstat", "access", "listdir", "scandir"):
        setattr(os, name, _wrap_path_first(getattr(os, name)))
    context = ssl.SSLContext
    load_verify = context.load_verify_locations
    load_chain = context.load_cert_chain

    def load_verify_locations(self, cafile=None, capath=None, cadata=None):  # type: ignore[no-untyped-def]
        return load_verify(self, redirected(cafile), redirected(capath), cadata)

    def load_cert_chain(self, certfile, keyfile=None, password=None):  # type: ignore[no-untyped-def]
        return load_chain(self, redirected(certfile), redirected(keyfile), password)

    context.load_verify_locations = load_verify_locations  # type: ignore[method-assign]
    context.load_cert_chain = load_cert_chain  # type: ignore[method-assign]


def _patch_names(facade: tuple[str, int]) -> None:
    getaddrinfo = socket.getaddrinfo
    gethostbyname = socket.gethostbyname
    gethostbyname_ex = socket.gethostbyname_ex
    address, facade_port = facade

    def tw_getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):  # type: ignore[no-untyped-def]
        if _api_host(host):
            # the Service's port (443, or any other asked) is the facade's
            return getaddrinfo(address, facade_port, family, type, proto, flags)
        return getaddrinfo(host, port, family, type, proto, flags)

    def tw_gethostbyname(host):  # type: ignore[no-untyped-def]
        return gethostbyname(address if _api_host(host) else host)

    def tw_gethostbyname_ex(host):  # type: ignore[no-untyped-def]
        if _api_host(host):
            return (host, [], [gethostbyname(address)])
        return gethostbyname_ex(host)

    socket.getaddrinfo = tw_getaddrinfo
    socket.gethostbyname = tw_gethostbyname
    socket.gethostbyname_ex = tw_gethostbyname_ex


def install(directory: str, facade: tuple[str, int] | None) -> None:
    """Redirect the service-account prefix to ``directory`` and the in-cluster API names
    to ``facade`` (host, port), once per process."""
    global _target_dir, _facade, _installed
    if _installed:
        return
    _installed = True
    _target_dir = os.path.abspath(directory).rstrip("/")
    _patch_files()
    if facade is not None:
        _facade = facade
        _patch_names(facade)


def facade_from_env(value: str | None) -> tuple[str, int] | None:
    """``host:port`` (``TIMEWARP_FACADE``) as a pair; None when absent or malformed."""
    if not value:
        return None
    host, _, port = value.rpartition(":")
    try:
        return (host.strip("[]") or "127.0.0.1", int(port))
    except ValueError:
        return None
