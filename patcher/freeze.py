"""``--freeze-unpatched``: wall-clock reads in modules that were *not* rewritten follow a
given clock too, so library timestamps and log records agree with virtual time.

This is freezegun, started once, with its clock source swapped for ours: freezegun
replaces ``time.time``/``time_ns``/``monotonic``/``perf_counter``/``localtime``/
``gmtime``/``strftime`` and ``datetime.datetime``/``datetime.date`` (with subclasses whose
``now``/``utcnow``/``today`` read the frozen clock) in the ``time`` and ``datetime``
modules and in every loaded module that imported them by name. freezegun only knows a
fixed or self-ticking time; its fakes ask ``freezegun.api.freeze_factories[-1]()`` for the
current UTC time, so that factory is the one thing replaced here, with a callable that
converts ``now_ns()``.

Invariants and limits:

- Code whose calling frames (freezegun looks five frames up) belong to a module listed in
  :data:`REAL_TIME_MODULES` or freezegun's own ignore list (``threading``, ``queue``,
  ``multiprocessing``...) keeps reading the real clock. That includes timewarp's runtime,
  so ``now_ns`` may itself call ``time.time_ns`` in passthrough without recursing, and the
  I/O stack (``socket``, ``ssl``, ``selectors``, ``urllib3``, ``asyncio``...), whose
  timeouts are real-time timeouts.
- Unpatched ``time.monotonic``/``perf_counter`` return freezegun's value for monotonic
  clocks: the clock's wall-clock seconds, not a separate monotonic origin.
- Unpatched *waits* (``threading.Event.wait`` in a library) stay real-time waits; only the
  readings change. Rewriting the library (``--patch-module``) is the cure for waits.
- Unpatched ``datetime.now()`` without a timezone returns naive *UTC* (freezegun's
  ``tz_offset`` would also shift ``now(tz)`` for aware datetimes, so it stays 0); the
  same in a container running in UTC, off by the local offset elsewhere.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence

import freezegun
import freezegun.api

REAL_TIME_MODULES: tuple[str, ...] = (
    "timewarp",
    "patcher",
    "broker",
    "simulator",
    "zmq",
    "asyncio",
    "concurrent",
    "selectors",
    "socket",
    "ssl",
    "subprocess",
    "urllib3",
    "http",
    # pydantic-based model layers (kubernetes >= 37) rebuild schemas lazily and cannot
    # take freezegun's FakeDatetime in place of datetime: leave them alone.
    "pydantic",
    "pydantic_core",
    "kubernetes",
)

_UNIX_EPOCH = _dt.datetime(1970, 1, 1)


class _ClockFactory:
    """freezegun's notion of "current time": a naive UTC datetime, from ``now_ns()``."""

    def __init__(self, now_ns: Callable[[], int]) -> None:
        self._now_ns = now_ns

    def __call__(self) -> _dt.datetime:
        return _UNIX_EPOCH + _dt.timedelta(microseconds=self._now_ns() // 1000)

    def tick(self, delta: object = None) -> None:
        raise RuntimeError("the frozen clock follows timewarp's clock; it cannot be ticked")

    move_to = tick


class FreezeHandle:
    """A running freeze; ``stop()`` (or leaving the ``with`` block) restores real time."""

    def __init__(self, freezer: freezegun.api._freeze_time) -> None:
        self._freezer = freezer
        self._stopped = False

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._freezer.stop()

    def __enter__(self) -> FreezeHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_freeze(
    now_ns: Callable[[], int], *, real_time_modules: Sequence[str] = ()
) -> FreezeHandle:
    """Make unpatched modules read ``now_ns()`` (ns since the Unix epoch) as wall time.

    ``real_time_modules`` adds module-name prefixes that keep the real clock, on top of
    :data:`REAL_TIME_MODULES`.
    """
    first = _ClockFactory(now_ns)()
    freezer = freezegun.freeze_time(
        first,
        tz_offset=0,
        ignore=[*REAL_TIME_MODULES, *real_time_modules],
        real_asyncio=True,
    )
    try:
        frozen = freezer.start()
    except BaseException:
        freezer.stop()  # never leave half the modules frozen
        raise
    factories = freezegun.api.freeze_factories
    if not factories or factories[-1] is not frozen:
        freezer.stop()
        raise RuntimeError("freezegun's internals changed: cannot plug timewarp's clock in")
    factories[-1] = _ClockFactory(now_ns)  # type: ignore[call-overload]
    return FreezeHandle(freezer)
