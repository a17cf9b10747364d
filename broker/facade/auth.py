"""Bearer tokens: one per scheduler process, so requests can be attributed to it."""

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


class TokenRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_token: dict[str, TokenStats] = {}
        self._by_name: dict[str, TokenStats] = {}
        self._first_request_listeners: list[Callable[[str], None]] = []

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
