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
  timeouts are real-time timeouts, and ``kubernetes``/``pydantic``.
- Unpatched ``time.monotonic``/``perf_counter`` return freezegun's value for monotonic
  clocks: the clock's wall-clock seconds, not a separate monotonic origin.
- Unpatched *waits* (``threading.Event.wait`` in a library) stay real-time waits; only the
  readings change. Rewriting the library (``--patch-module``) is the cure for waits.
- Classes created while frozen see freezegun's ``FakeDatetime`` as ``datetime.datetime``;
  pydantic models among them are taught to treat it as the real class (kubernetes >= 37
  declares its models with pydantic, lazily).
- Unpatched ``datetime.now()`` without a timezone returns naive *UTC* (freezegun's
  ``tz_offset`` would also shift ``now(tz)`` for aware datetimes, so it stays 0); the
  same in a container running in UTC, off by the local offset elsewhere.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import freezegun
import freezegun.api

REAL_TIME_MODULES: tuple[str, ...] = (
    "timewarp",
    "patcher",
    "broker",
    "simulator",
    "commands",
    "zmq",
    "asyncio",
    "concurrent",
    "selectors",
    "socket",
    "ssl",
    "subprocess",
    "urllib3",
    "http",
    # pydantic-based model layers (kubernetes >= 37) build schemas lazily: keep their
    # references to the real classes (models declared while frozen are covered by
    # _teach_pydantic_the_fake_classes), and the client's HTTP timing real.
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
    _teach_pydantic_the_fake_classes()
    try:
        with _lazy_modules_list_only_what_is_loaded():
            frozen = freezer.start()
    except BaseException:
        # freezegun patches modules one by one and may fail half-way (a lazy module
        # attribute that raises on access): undo what it did before reporting.
        if freezegun.api.freeze_factories:
            freezer.stop()
        raise
    factories = freezegun.api.freeze_factories
    if not factories or factories[-1] is not frozen:
        freezer.stop()
        raise RuntimeError("freezegun's internals changed: cannot plug timewarp's clock in")
    factories[-1] = _ClockFactory(now_ns)  # type: ignore[call-overload]
    return FreezeHandle(freezer)


def _teach_pydantic_the_fake_classes() -> None:
    """Let pydantic models declared while frozen accept ``datetime``/``date`` fields.

    freezegun swaps ``datetime.datetime`` for its ``FakeDatetime`` subclass, so a model
    class created during the freeze (often: a lazily imported ``kubernetes`` >= 37 model)
    is annotated with ``FakeDatetime``, for which pydantic has no schema. The fake classes
    get pydantic's schema hook returning pydantic-core's own datetime/date schema (what
    pydantic uses for the real classes): values parsed from strings are real ``datetime``
    objects, datetime instances pass through. Nothing happens without pydantic.
    """
    try:
        from pydantic_core import core_schema
    except ImportError:
        return
    api = freezegun.api
    for fake, make_schema in (
        (api.FakeDatetime, core_schema.datetime_schema),
        (api.FakeDate, core_schema.date_schema),
    ):
        if "__get_pydantic_core_schema__" in fake.__dict__:
            continue

        def schema(cls: type, source: object, handler: Any, _make: Any = make_schema) -> Any:
            return _make()

        fake.__get_pydantic_core_schema__ = classmethod(schema)  # type: ignore[attr-defined]


@contextlib.contextmanager
def _lazy_modules_list_only_what_is_loaded() -> Iterator[None]:
    """While freezegun scans modules, make lazy modules' ``dir()`` list only loaded names.

    freezegun calls ``getattr`` on every name ``dir(module)`` lists. A lazy module (PEP
    562 ``__getattr__``/``__dir__``, as ``kubernetes.client`` >= 37) would import all of its
    submodules for that — seconds of start-up. Names not loaded yet cannot hold a clock
    function; when they are imported later they pick up the fakes like any new import.
    """
    patched: list[tuple[dict[str, Any], Any]] = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and "__getattr__" in namespace and "__dir__" in namespace:
            patched.append((namespace, namespace["__dir__"]))
            namespace["__dir__"] = functools.partial(sorted, namespace)
    try:
        yield
    finally:
        for namespace, original in patched:
            namespace["__dir__"] = original
