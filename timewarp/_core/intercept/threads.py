"""Patched at run time: ``threading.Thread.start``/``join``, so that every thread of the
process is tracked (it waits for the baton like the rest), including threads started by
libraries that were not rewritten; ``join`` waits in virtual time."""

from __future__ import annotations

import threading

from timewarp._core import current, selftime
from timewarp._core import runtime as _runtime
from timewarp._core.intercept.base import Mechanism

_orig_start = threading.Thread.start
_orig_join = threading.Thread.join


def _patch(rt: _runtime.Runtime) -> None:
    threading.Thread.start = _start  # type: ignore[method-assign]
    threading.Thread.join = _join  # type: ignore[method-assign]
    threading._register_atexit(_root_thread_done)  # type: ignore[attr-defined]
    current.on_deactivate(_restore)


def _restore() -> None:
    threading.Thread.start = _orig_start  # type: ignore[method-assign]
    threading.Thread.join = _orig_join  # type: ignore[method-assign]


def _root_thread_done() -> None:
    """The main thread finished the program: it stops counting (and frees the baton)
    while the interpreter joins the remaining non-daemon threads."""
    rt = current.ACTIVE
    if rt is None:
        return
    ts = rt.threads.get(threading.get_ident())
    if ts is not None and ts.tracked:
        rt.exit(ts)


def _start(self: threading.Thread) -> None:
    rt = current.ACTIVE
    if rt is None or getattr(self, "_timewarp_internal", False):
        return _orig_start(self)
    if self._started.is_set():  # type: ignore[attr-defined]
        raise RuntimeError("threads can only be started once")
    with rt.lock:
        parent = rt.current()
        if not parent.tracked:
            ts = None
        else:
            ts = rt.new_child_locked(parent, self.name, daemon=self.daemon)
    if ts is None:
        return _orig_start(self)
    run = self.run

    def _tracked_run() -> None:
        rt.enter(ts)
        selftime.start_thread_profile()  # --profile: each thread its own cProfile
        try:
            run()
        finally:
            selftime.stop_thread_profile()
            rt.exit(ts)

    self.run = _tracked_run  # type: ignore[method-assign]
    self._timewarp_state = ts  # type: ignore[attr-defined]
    try:
        _orig_start(self)
    except BaseException:
        with rt.lock:
            if ts in rt.ready:
                rt.ready.remove(ts)
        raise


def _join(self: threading.Thread, timeout: float | None = None) -> None:
    rt = current.ACTIVE
    ts = getattr(self, "_timewarp_state", None)
    if rt is None or ts is None:
        return _orig_join(self, timeout)
    if not self._started.is_set():  # type: ignore[attr-defined]
        raise RuntimeError("cannot join thread before it is started")
    if self is threading.current_thread():
        raise RuntimeError("cannot join current thread")
    with rt.lock:
        if not ts.done:
            waiter = _runtime.Waiter(rt.current())
            ts.joiners.append(waiter)
            deadline = None
            if timeout is not None:
                deadline = rt.now_ns + max(0, current.seconds_to_ns(timeout))
            rt.park_locked(waiter, deadline, sync=True)
            if waiter.state == _runtime.TIMEDOUT:
                if waiter in ts.joiners:
                    ts.joiners.remove(waiter)
                return None
    # The thread has left its run(): the rest of its exit is short and real.
    return _orig_join(self)


MECHANISM = Mechanism("threads", patch=_patch)
