"""Adjusted at import: ``concurrent.futures`` (APScheduler's and asyncio's thread pools,
``Future.result(timeout)``) waits on virtual primitives: its ``threading`` and its
workers' ``queue`` are shims with the drop-ins' classes, for that library only."""

from __future__ import annotations

import queue
import threading
import types

from timewarp._core.intercept.base import Mechanism
from timewarp._core.shim import ModuleShim


def _virtualize_base(cf_base: types.ModuleType) -> None:
    from timewarp import vthreading  # loaded with the library, not at activation

    virtual_threading = {
        name: getattr(vthreading, name)
        for name in ("Condition", "Event", "Lock", "RLock", "Semaphore", "BoundedSemaphore")
    }
    cf_base.threading = ModuleShim(threading, virtual_threading)  # type: ignore[attr-defined]


def _virtualize_thread(cf_thread: types.ModuleType) -> None:
    from timewarp import vqueue

    overrides = {"SimpleQueue": vqueue.SimpleQueue, "Queue": vqueue.Queue}
    cf_thread.queue = ModuleShim(queue, overrides)  # type: ignore[attr-defined]


MECHANISM = Mechanism(
    "concurrent.futures",
    after_import={
        "concurrent.futures._base": _virtualize_base,
        "concurrent.futures.thread": _virtualize_thread,
    },
)
