"""Adjusted at import: log records carry virtual time: the standard library's
``logging`` (``%(asctime)s``, ``created``, ``relativeCreated``), loguru's ``{time}`` and
structlog's ``TimeStamper``.

Each library reads the wall clock through a name it holds (``logging``'s module global
``time``, loguru's ``aware_now`` and its start time, structlog's ``time`` and
``datetime`` module globals in ``structlog.processors``); each is re-pointed at the
virtual clock right after the library is imported (or at once, if it already was), so a
log line says when it happened in simulated time — two bindings 170 simulated seconds
apart are 170 s apart in the log — under a broker and in standalone runs, without
``--freeze-unpatched`` and without rewriting the libraries. Everything else of these
libraries is untouched (file rotation, for one, stays on the wall clock).
"""

from __future__ import annotations

import datetime as _dt
import time as _time
import types

from timewarp import vdatetime, vtime
from timewarp._core.intercept.base import Mechanism
from timewarp._core.shim import ModuleShim


def _virtual_time_module() -> types.ModuleType:
    return ModuleShim(_time, {"time": vtime.time, "time_ns": vtime.time_ns})


def virtualize_logging(logging: types.ModuleType) -> None:
    logging.time = _virtual_time_module()  # LogRecord reads time.time() / time.time_ns()
    # relativeCreated is measured from the module's start time, in the unit it uses
    if isinstance(getattr(logging, "_startTime", None), int):
        logging._startTime = vtime.time_ns()
    else:
        logging._startTime = vtime.time()


def virtualize_loguru(logger_module: types.ModuleType) -> None:
    """``loguru._logger``: each record's time comes from ``aware_now()``; the elapsed
    time from ``start_time``."""
    from loguru import _datetime

    aware = _datetime.datetime  # loguru's datetime subclass (its own __format__)

    def aware_now() -> _dt.datetime:
        ns = vtime.time_ns()
        secs, rem = divmod(ns, 1_000_000_000)
        local = _time.localtime(secs)
        tz = _dt.timezone(_dt.timedelta(seconds=local.tm_gmtoff), local.tm_zone)
        return aware.fromtimestamp(secs, tz).replace(microsecond=rem // 1000)

    _datetime.aware_now = aware_now
    logger_module.aware_now = aware_now
    logger_module.start_time = aware_now()


class _StructlogDatetime(_dt.datetime):
    """What ``structlog.processors`` sees as ``datetime.datetime``: ``now()`` is virtual
    (it returns a real ``datetime``)."""

    @classmethod
    def now(cls, tz: _dt.tzinfo | None = None) -> _dt.datetime:  # type: ignore[override]
        return vdatetime.datetime_now(tz)


def virtualize_structlog(processors: types.ModuleType) -> None:
    processors.time = _virtual_time_module()
    processors.datetime = ModuleShim(_dt, {"datetime": _StructlogDatetime})


MECHANISM = Mechanism(
    "logging",
    after_import={
        "logging": virtualize_logging,
        "loguru._logger": virtualize_loguru,
        "structlog.processors": virtualize_structlog,
    },
)
