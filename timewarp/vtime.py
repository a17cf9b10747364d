"""Drop-in virtual ``time`` functions (same signatures, return types and errors).

Wall-clock readings are the broker's epoch plus virtual time; monotonic readings are a
fixed offset plus virtual time. ``process_time``/``thread_time`` are not here: they
measure CPU and stay real. With no broker configured, each function is the standard
library's.
"""

from __future__ import annotations

import time as _t

from timewarp._core.current import active, seconds_to_ns

__all__ = [
    "time",
    "time_ns",
    "monotonic",
    "monotonic_ns",
    "perf_counter",
    "perf_counter_ns",
    "sleep",
    "localtime",
    "gmtime",
    "ctime",
    "asctime",
    "strftime",
]

_NS = 1_000_000_000
_UNSET = object()


def time_ns() -> int:
    rt = active()
    if rt is None:
        return _t.time_ns()
    return rt.epoch_ns + rt.now()


def time() -> float:
    rt = active()
    if rt is None:
        return _t.time()
    return (rt.epoch_ns + rt.now()) / _NS


def monotonic_ns() -> int:
    rt = active()
    if rt is None:
        return _t.monotonic_ns()
    return rt.mono_ns + rt.now()


def monotonic() -> float:
    rt = active()
    if rt is None:
        return _t.monotonic()
    return (rt.mono_ns + rt.now()) / _NS


def perf_counter_ns() -> int:
    rt = active()
    if rt is None:
        return _t.perf_counter_ns()
    return rt.mono_ns + rt.now()


def perf_counter() -> float:
    rt = active()
    if rt is None:
        return _t.perf_counter()
    return (rt.mono_ns + rt.now()) / _NS


def sleep(secs: float, /) -> None:
    rt = active()
    if rt is None:
        return _t.sleep(secs)
    ns = seconds_to_ns(secs, what="sleep length")
    if ns < 0:
        raise ValueError("sleep length must be non-negative")
    if ns == 0:
        rt.yield_baton()
        return None
    rt.wait_for_wake(rt.now() + ns)
    return None


def _virtual_seconds() -> float:
    return time()


def localtime(secs: float | None = _UNSET, /) -> _t.struct_time:  # type: ignore[assignment]
    if secs is _UNSET or secs is None:
        if active() is None:
            return _t.localtime()
        secs = _virtual_seconds()
    return _t.localtime(secs)


def gmtime(secs: float | None = _UNSET, /) -> _t.struct_time:  # type: ignore[assignment]
    if secs is _UNSET or secs is None:
        if active() is None:
            return _t.gmtime()
        secs = _virtual_seconds()
    return _t.gmtime(secs)


def ctime(secs: float | None = _UNSET, /) -> str:  # type: ignore[assignment]
    if secs is _UNSET or secs is None:
        if active() is None:
            return _t.ctime()
        secs = _virtual_seconds()
    return _t.ctime(secs)


def asctime(t: tuple | _t.struct_time = _UNSET, /) -> str:  # type: ignore[assignment]
    if t is _UNSET:
        if active() is None:
            return _t.asctime()
        t = localtime()
    return _t.asctime(t)


def strftime(format: str, t: tuple | _t.struct_time = _UNSET, /) -> str:  # type: ignore[assignment]
    if t is _UNSET:
        if active() is None:
            return _t.strftime(format)
        t = localtime()
    return _t.strftime(format, t)
