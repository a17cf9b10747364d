"""Authentication and the observer's authorization: who a request comes from, which
simulated process it belongs to, and what the observer may not do.

- Credentials, in kube-apiserver's order: a client certificate issued by the run's CA
  (``clientcert.py``), then a bearer token (a scheduler's, or the observer's).
- The process: a request sent by timewarp's runtime carries ``X-Timewarp-Seq:
  <pid>-<nonce>.<n>``; with a ``process_of_pid`` resolver (the broker's clock service
  knows each simulated process's pid) the request belongs to that process whatever
  credential it carries — so a scheduler's token used by kubectl or a load generator is
  charged to nobody, and a scheduler that loads the observer's kubeconfig from a fixed
  path (``--write-kubeconfig``) acts as itself. Without a resolver (a facade on its own,
  real-time mode) a scheduler's token names its process, as before.
- The observer is read-only (by default): any other verb gets 403 with the Status
  kube-apiserver's RBAC authorizer writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from .auth import Identity, TokenRegistry, bearer_token
from .errors import ApiError
from .sequencer import seq_key

if TYPE_CHECKING:
    from .clientcert import CertAuthenticator

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class Authenticator:
    def __init__(self, tokens: TokenRegistry) -> None:
        self.tokens = tokens
        self.certs: CertAuthenticator | None = None  # set when the facade serves HTTPS
        # pid -> the simulated process's name (None: not one); None: no clock to ask
        self.process_of_pid: Callable[[int], str | None] | None = None

    def identify(self, headers: dict[str, str], peer_cert: bytes | None) -> Identity | None:
        identity = self.credential(headers, peer_cert)
        if identity is None or self.process_of_pid is None:
            return identity
        return self._attribute(identity, headers)

    def admission_identity(
        self, headers: dict[str, str], peer_cert: bytes | None
    ) -> Identity | None:
        """What a request head's check needs (``forbidden``: a valid credential and
        whether it is read-only): the attribution to a simulated process (a look-up under
        the clock's lock) only where it can change that — the observer's credential,
        which a simulated process's request sheds. The request's own ``identify`` later
        attributes it in full."""
        identity = self.credential(headers, peer_cert)
        if identity is None or not identity.observer or self.process_of_pid is None:
            return identity
        return self._attribute(identity, headers)

    def credential(self, headers: dict[str, str], peer_cert: bytes | None) -> Identity | None:
        """Who the request's credential (client certificate, else bearer token) names,
        before any attribution to a simulated process (None: none valid)."""
        identity = None
        if peer_cert and self.certs is not None:
            found = self.certs.identify(peer_cert)
            if found is not None:
                user, groups = found
                identity = Identity(user, (*groups, "system:authenticated"))
        if identity is None:
            identity = self.tokens.identify(bearer_token(headers.get("authorization")))
        return identity

    def _attribute(self, identity: Identity, headers: dict[str, str]) -> Identity:
        """The identity as the simulated process that sent the request (if one did)."""
        key = seq_key(headers)
        pid = key[0].partition("-")[0] if key else ""
        process = self.process_of_pid(int(pid)) if pid.isdigit() else None  # type: ignore[misc]
        if process == identity.process and not identity.observer:
            return identity  # a token's own process (frozen: the same identity)
        if process is None:
            return replace(identity, process=None)
        if identity.observer:  # the observer's kubeconfig loaded by a simulated process
            return Identity(process, stats=self.tokens.entry(process), process=process)
        return replace(identity, process=process)


def forbidden(identity: Identity, method: str, target: str) -> ApiError | None:
    """403 for a read-only identity's write, worded as kube-apiserver's authorizer."""
    if not identity.read_only or method in READ_METHODS:
        return None
    parts = [unquote(p) for p in urlsplit(target).path.split("/") if p]
    group = ""
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        rest = []
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else None
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    verb = _VERBS.get(method, method.lower())
    if verb == "delete" and name is None:
        verb = "deletecollection"
    user = f'User "{identity.user}"'
    if not resource:
        message = f'forbidden: {user} cannot {method.lower()} path "{urlsplit(target).path}"'
    else:
        what = f'{resource} "{name}"' if name else resource
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        message = (
            f'{what} is forbidden: {user} cannot {verb} resource "{resource}" '
            f'in API group "{group}"{where}'
        )
    kind = resource.partition("/")[0] or None
    return ApiError(403, message, "Forbidden", kind=kind, name=name, group=group or None)
