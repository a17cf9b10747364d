"""Go's ``time.Parse`` for the one layout kube-apiserver decodes ``metav1.MicroTime``
with (``RFC3339Micro``, ``2006-01-02T15:04:05.000000Z07:00``: exactly six fractional
digits), with Go's error words, so that a value the server refuses is refused here with
the same message (``parsing time "…" as "…": cannot parse "+00:00" as ".000000"``).

Pure functions; no state.
"""

from __future__ import annotations

import calendar
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"


class GoTimeError(ValueError):
    """A value that does not parse; ``str()`` is Go's ``*time.ParseError`` message."""


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # Go's quote(), near enough


def _fail(value: str, layout_elem: str, value_elem: str) -> GoTimeError:
    return GoTimeError(
        f"parsing time {_quote(value)} as {_quote(RFC3339_MICRO)}: cannot parse "
        f"{_quote(value_elem)} as {_quote(layout_elem)}"
    )


def _out_of_range(value: str, what: str) -> GoTimeError:
    return GoTimeError(f"parsing time {_quote(value)}: {what} out of range")


def _digits(text: str, count: int) -> int | None:
    head = text[:count]
    return int(head) if len(head) == count and head.isascii() and head.isdigit() else None


def _num(text: str, fixed: bool) -> tuple[int, str] | None:
    """Go's ``getnum``: two digits, or one when not ``fixed``."""
    if not text[:1].isdigit():
        return None
    if not text[1:2].isdigit():
        return None if fixed else (int(text[0]), text[1:])
    return int(text[:2]), text[2:]


def parse_micro_time(value: str, *, whole_seconds: bool = False) -> datetime:
    """The instant ``value`` names, as ``time.Parse(RFC3339Micro, value)`` reads it.
    ``whole_seconds``: also take a value with no fraction at all (what Python's
    ``isoformat()`` writes at a whole second), which Go refuses."""
    rest = value
    parts: dict[str, int] = {}
    numbers: list[tuple[str, str, bool, int]] = [
        ("month", "01", True, 12),
        ("day", "02", True, 31),
        ("hour", "15", False, 23),
        ("minute", "04", True, 59),
        ("second", "05", True, 59),
    ]
    year = _digits(rest, 4)
    if year is None:
        raise _fail(value, "2006", rest)
    rest = rest[4:]
    for sep, (name, elem, fixed, top) in zip(("-", "-", "T", ":", ":"), numbers, strict=True):
        if rest[:1] != sep:
            raise _fail(value, sep, rest)
        rest = rest[1:]
        got = _num(rest, fixed)
        if got is None:
            raise _fail(value, elem, rest)
        number, after = got
        if number > top or (name in ("month", "day") and number < 1):
            raise _out_of_range(value, name)
        parts[name], rest = number, after
    micro = 0
    if whole_seconds and rest[:1] not in (".", ","):
        pass  # no fraction at all: taken as .000000
    elif len(rest) < 7 or rest[0] not in ".," or _digits(rest[1:], 6) is None:
        raise _fail(value, ".000000", rest)
    else:
        micro, rest = int(rest[1:7]), rest[7:]
    zone, rest = _zone(value, rest)
    if rest:
        raise GoTimeError(f"parsing time {_quote(value)}: extra text: {_quote(rest)}")
    if parts["day"] > calendar.monthrange(year, parts["month"])[1]:
        raise _out_of_range(value, "day")
    return datetime(
        year, parts["month"], parts["day"], parts["hour"], parts["minute"], parts["second"],
        micro, tzinfo=zone,
    )  # fmt: skip


def _zone(value: str, rest: str) -> tuple[timezone, str]:
    """``Z07:00``: ``Z`` or ``±hh:mm``."""
    if rest[:1] == "Z":
        return UTC, rest[1:]
    bad: Callable[[], GoTimeError] = lambda: _fail(value, "Z07:00", rest)  # noqa: E731
    if len(rest) < 6 or rest[3] != ":" or rest[0] not in "+-":
        raise bad()
    hours, minutes = _digits(rest[1:3], 2), _digits(rest[4:6], 2)
    if hours is None or minutes is None:
        raise bad()
    if hours >= 24:  # Go takes +24:00; a Python offset must stay under a day
        raise _out_of_range(value, "time zone offset hour")
    if minutes > 60:
        raise _out_of_range(value, "time zone offset minute")
    offset = timedelta(hours=hours, minutes=minutes)
    return timezone(-offset if rest[0] == "-" else offset), rest[6:]


def format_micro_time(at: datetime) -> str:
    """``MicroTime.MarshalJSON``: the instant in UTC with six fractional digits."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
