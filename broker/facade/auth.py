"""Who a request comes from: bearer tokens (one per scheduler process, so requests can be
attributed to it, and one *observer* token for people and their tools) and, over HTTPS,
client certificates issued by the run's CA (``clientcert.py``).

An ``Identity`` is what the rest of the facade sees: the user and groups (as
kube-apiserver's authenticators name them), the counters of a scheduler's token, whether
it is the read-only observer, and ``process`` — the simulated process the request is
charged to and ordered for (its runtime's ``X-Timewarp-Seq``), if any. See
``docs/security.md``, "Identities".
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class TokenStats:
    """Counters for one token. ``in_flight`` counts requests read but not yet answered
    (a watch counts until its initial events are written, then moves to ``watches``)."""

    name: str
    token: str
    in_flight: int = 0
    requests: int = 0
    watches: int = 0


OBSERVER_USER = "timewarp:observer"
OBSERVER_GROUPS = ("timewarp:observers", "system:authenticated")


@dataclass(frozen=True)
class Identity:
    """An authenticated requester. ``stats``: the counters of the scheduler token it
    carried (None for the observer and certificate users); ``process``: the simulated
    process (clock name) the request belongs to, or None for a client outside the
    simulation (kubectl, a load generator), which is never charged nor ordered."""

    user: str
    groups: tuple[str, ...] = ("system:authenticated",)
    stats: TokenStats | None = None
    observer: bool = False
    process: str | None = None

    @property
    def read_only(self) -> bool:
        return self.observer


class TokenRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_token: dict[str, TokenStats] = {}
        self._by_name: dict[str, TokenStats] = {}
        self._first_request_listeners: list[Callable[[str], None]] = []
        self._observer_token: str | None = None

    def observer_token(self) -> str:
        """The observer's bearer token (made on first use; one per registry)."""
        with self._lock:
            if self._observer_token is None:
                self._observer_token = secrets.token_urlsafe(24)
            return self._observer_token

    def identify(self, token: str | None) -> Identity | None:
        """The identity a bearer token proves (None: no token, or not one of ours)."""
        if not token:
            return None
        with self._lock:
            stats = self._by_token.get(token)
            observer = self._observer_token
        if stats is not None:
            return Identity(stats.name, stats=stats, process=stats.name)
        if observer is not None and secrets.compare_digest(token, observer):
            return Identity(OBSERVER_USER, OBSERVER_GROUPS, observer=True)
        return None

    def entry(self, name: str) -> TokenStats | None:
        """The live counters of ``name`` (None if it has no token)."""
        with self._lock:
            return self._by_name.get(name)

    def add_first_request_listener(self, fn: Callable[[str], None]) -> None:
        """``fn(name)`` is called once per token, on the first request that carries it
        (in the facade's connection thread, before the request is handled)."""
        with self._lock:
            self._first_request_listeners.append(fn)

    def add(self, name: str, token: str | None = None) -> str:
        """Register ``name`` (idempotent: the same name keeps its token) and return its token."""
        with self._lock:
            if name in self._by_name:
                return self._by_name[name].token
            token = token or secrets.token_urlsafe(24)
            if token in self._by_token:
                raise ValueError(f"token already registered for {self._by_token[token].name!r}")
            stats = TokenStats(name, token)
            self._by_token[token] = stats
            self._by_name[name] = stats
            return token

    def lookup(self, token: str | None) -> TokenStats | None:
        if not token:
            return None
        with self._lock:
            return self._by_token.get(token)

    def stats(self, name: str) -> TokenStats:
        """A snapshot of the counters of ``name``; KeyError if unknown."""
        with self._lock:
            s = self._by_name[name]
            return TokenStats(s.name, s.token, s.in_flight, s.requests, s.watches)

    def adjust(
        self, stats: TokenStats, *, in_flight: int = 0, requests: int = 0, watches: int = 0
    ) -> None:
        with self._lock:
            first = requests > 0 and stats.requests == 0
            stats.in_flight += in_flight
            stats.requests += requests
            stats.watches += watches
            listeners = list(self._first_request_listeners) if first else []
        for fn in listeners:
            fn(stats.name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._by_name)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <t>`` header (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()
