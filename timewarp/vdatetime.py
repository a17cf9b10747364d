"""Virtual ``datetime.now()`` & co. They return real ``datetime``/``date`` objects, never
subclasses, so isinstance checks, pydantic and database drivers keep working."""

from __future__ import annotations

import datetime as _dt

from timewarp._core.current import active

__all__ = ["datetime_now", "datetime_utcnow", "datetime_today", "date_today"]

_NS = 1_000_000_000


def _from_ns(ns: int, tz: _dt.tzinfo | None) -> _dt.datetime:
    secs, rem = divmod(ns, _NS)
    return _dt.datetime.fromtimestamp(secs, tz).replace(microsecond=rem // 1000)


def datetime_now(tz: _dt.tzinfo | None = None) -> _dt.datetime:
    """``datetime.datetime.now(tz)``."""
    if tz is not None and not isinstance(tz, _dt.tzinfo):
        raise TypeError(
            f"tzinfo argument must be None or of a tzinfo subclass, not type '{type(tz).__name__}'"
        )
    rt = active()
    if rt is None:
        return _dt.datetime.now(tz)
    return _from_ns(rt.epoch_ns + rt.now(), tz)


def datetime_utcnow() -> _dt.datetime:
    """``datetime.datetime.utcnow()``: naive UTC."""
    rt = active()
    if rt is None:
        return _dt.datetime.now(_dt.UTC).replace(tzinfo=None)
    return _from_ns(rt.epoch_ns + rt.now(), _dt.UTC).replace(tzinfo=None)


def datetime_today() -> _dt.datetime:
    """``datetime.datetime.today()``: naive local time."""
    return datetime_now()


def date_today() -> _dt.date:
    """``datetime.date.today()``."""
    return datetime_now().date()
