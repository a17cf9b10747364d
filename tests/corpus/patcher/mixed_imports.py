# A compatibility module that others import from.
from threading import (
    Event,  # wake-ups
    current_thread,
    get_ident,
)
from queue import Empty, LifoQueue, Full
from time import monotonic as _monotonic, strptime; from os import getpid

try:
    from time import monotonic_ns
except ImportError:  # pragma: no cover
    from time import time_ns as monotonic_ns

__all__ = ["Event", "LifoQueue", "monotonic_ns", "now"]


def now() -> float:
    return _monotonic()
