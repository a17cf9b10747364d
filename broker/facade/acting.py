"""Who is acting: the identity of the API request a thread is handling, for what the
store's listeners record (``broker/cluster/decisions.py``). Empty outside a request (the
broker's controllers and kubelet model, in the driver thread)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_current = threading.local()


def current() -> str:
    """The name behind the request this thread handles ("" when none)."""
    return getattr(_current, "name", "")


@contextlib.contextmanager
def acting_as(name: str) -> Iterator[None]:
    previous = current()
    _current.name = name
    try:
        yield
    finally:
        _current.name = previous
