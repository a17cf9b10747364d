"""Turning the runtime on: from the environment a launcher set, once per process.

With no ``TIMEWARP_CLOCK`` in the environment nothing happens and every drop-in behaves
exactly like the standard library (passthrough), so patched code still runs on a real
cluster. With it, the first import of any ``timewarp.v*`` module connects to the broker,
adopts the current thread as the root of the thread tree, and hooks
``threading.Thread.start``/``join`` so that every thread of the process is tracked —
including threads started by libraries that were not rewritten.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.abc
import math
import os
import sys
import threading
import types
from collections.abc import Callable

from timewarp._core import runtime as _runtime
from timewarp._core.shim import ModuleShim
from timewarp.wire import clockproto

_orig_start = threading.Thread.start
_orig_join = threading.Thread.join
_activation_lock = threading.Lock()
CLIENT = None  # the ClockClient, when active


def seconds_to_ns(secs: object, *, what: str = "timeout") -> int:
    """Virtual durations are integer nanoseconds; reject what the stdlib rejects."""
    if isinstance(secs, bool) or not isinstance(secs, int | float):
        try:
            secs = float(secs)  # Decimal, numpy scalars, ...
        except (TypeError, ValueError):
            raise TypeError(
                f"'{type(secs).__name__}' object cannot be interpreted as an integer or float"
            ) from None
    if isinstance(secs, float) and (math.isnan(secs) or math.isinf(secs)):
        if math.isinf(secs) and secs > 0:
            return 2**62
        raise ValueError(f"Invalid value {secs!r} for {what}")
    return int(round(secs * 1_000_000_000))


def active() -> _runtime.Runtime | None:
    rt = _runtime.ACTIVE
    if rt is not None or clockproto.ENV_ENDPOINT not in os.environ:
        return rt
    return activate_from_env()


def activate_from_env() -> _runtime.Runtime | None:
    global CLIENT
    with _activation_lock:
        if _runtime.ACTIVE is not None:
            return _runtime.ACTIVE
        endpoint = os.environ.get(clockproto.ENV_ENDPOINT)
        if not endpoint:
            return None
        from timewarp._core.client import BrokerUnreachable, ClockClient

        name = os.environ.get(clockproto.ENV_NAME) or f"pid{os.getpid()}"
        broker_pid = os.environ.get(clockproto.ENV_BROKER_PID)
        timeout = float(os.environ.get(clockproto.ENV_CONNECT_TIMEOUT, "10"))
        client = ClockClient(
            endpoint,
            name,
            broker_pid=int(broker_pid) if broker_pid else None,
            token=os.environ.get(clockproto.ENV_TOKEN),
        )
        try:
            welcome = client.handshake(timeout)
        except BrokerUnreachable as exc:
            sys.stderr.write(f"{exc}\n")
            sys.stderr.flush()
            os._exit(3)
        rt = _runtime.Runtime(
            now_ns=welcome["t"],
            epoch_ns=welcome["epoch"],
            mono_ns=welcome["mono"],
            mode=welcome["mode"],
            poke=client.poke,
            flush=client.flush_locked,
            now_roundtrip=os.environ.get("TIMEWARP_NOW") == "roundtrip",
        )
        rt.adopt_main()
        _runtime.ACTIVE = rt
        threading.Thread.start = _start  # type: ignore[method-assign]
        threading.Thread.join = _join  # type: ignore[method-assign]
        client.start(rt)
        CLIENT = client
        threading._register_atexit(_root_thread_done)  # type: ignore[attr-defined]
        atexit.register(client.send_bye)
        os.register_at_fork(after_in_child=_deactivate_in_child)
        _virtualize_stdlib()
        facade = os.environ.get(clockproto.ENV_FACADE)
        if facade:
            from timewarp._core import netio as _netio

            _netio.install(facade)
        from timewarp._core import servers as _servers

        _servers.install(when_imported)  # after netio: its socket wrappers stay inner
        return rt


def _virtualize_stdlib() -> None:
    """Standard-library code that schedulers lean on and that waits: concurrent.futures
    (APScheduler's and asyncio's thread pools, ``Future.result(timeout)``) and asyncio's
    loops (and anyio's worker threads, which asyncio programs reach through httpx). Their waits become virtual; everything else of the stdlib stays real. Each is
    adjusted when the program first imports it (importing asyncio costs tens of ms that a
    program without it should not pay). Log records get virtual timestamps
    (``timewarp._core.logclock``)."""
    from timewarp._core import logclock

    when_imported(
        {
            "concurrent.futures._base": _virtualize_futures_base,
            "concurrent.futures.thread": _virtualize_futures_thread,
            "asyncio": _virtualize_asyncio,
            "anyio._backends._asyncio": _virtualize_anyio,
            **logclock.HOOKS,
        }
    )


def _drop_in(name: str) -> types.ModuleType:
    """The drop-in module ``timewarp.<name>``, by name. The drop-ins call :func:`active`
    (this module) to find the runtime, and activation hands the standard library over to
    them: importing them by name here keeps that a one-way dependency between files."""
    return importlib.import_module(f"timewarp.{name}")


def _virtualize_futures_base(cf_base: types.ModuleType) -> None:
    vthreading = _drop_in("vthreading")
    virtual_threading = {
        name: getattr(vthreading, name)
        for name in ("Condition", "Event", "Lock", "RLock", "Semaphore", "BoundedSemaphore")
    }
    cf_base.threading = ModuleShim(threading, virtual_threading)  # type: ignore[attr-defined]


def _virtualize_futures_thread(cf_thread: types.ModuleType) -> None:
    import queue

    vqueue = _drop_in("vqueue")
    overrides = {"SimpleQueue": vqueue.SimpleQueue, "Queue": vqueue.Queue}
    cf_thread.queue = ModuleShim(queue, overrides)  # type: ignore[attr-defined]


def _virtualize_anyio(backend: types.ModuleType) -> None:
    """anyio's worker threads (``to_thread.run_sync``: httpx's async clients, kr8s) wait
    for work on a stdlib ``queue.Queue``: a virtual one, like concurrent.futures'."""
    backend.Queue = _drop_in("vqueue").Queue  # type: ignore[attr-defined]


def _virtualize_asyncio(_asyncio: types.ModuleType) -> None:
    partial = sys.modules.get("timewarp.vasyncio")
    if partial is not None and not hasattr(partial, "install_policy"):
        return  # vasyncio itself is importing asyncio: it installs the policy when done
    _drop_in("vasyncio").install_policy()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``hooks[name](module)`` right after ``name`` is first executed. Other finders
    may consult this one while they look (the patcher's does): a spec is handed out for
    as long as the module has not run, and a lookup in progress does not recurse."""

    def __init__(self, hooks: dict[str, Callable[[types.ModuleType], None]]) -> None:
        self.hooks = hooks
        self._looking: set[str] = set()

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        hook = self.hooks.get(fullname)
        if hook is None or fullname in self._looking:
            return None
        self._looking.add(fullname)
        try:
            spec = None
            for finder in list(sys.meta_path):
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(fullname, path, target)
                    if spec is not None:
                        break
        finally:
            self._looking.discard(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_hook(module: types.ModuleType) -> None:
            exec_module(module)
            if self.hooks.pop(fullname, None) is not None:
                if not self.hooks and self in sys.meta_path:
                    sys.meta_path.remove(self)
                hook(module)

        loader.exec_module = exec_then_hook  # type: ignore[method-assign]
        return spec


def when_imported(hooks: dict[str, Callable[[types.ModuleType], None]]) -> None:
    pending = {}
    for name, hook in hooks.items():
        module = sys.modules.get(name)
        if module is not None:
            hook(module)
        else:
            pending[name] = hook
    if pending:
        sys.meta_path.insert(0, _AfterImport(pending))


def _deactivate_in_child() -> None:
    # A forked child cannot share the parent's clock connection; it runs in real time.
    global CLIENT
    _runtime.ACTIVE = None
    CLIENT = None
    threading.Thread.start = _orig_start  # type: ignore[method-assign]
    threading.Thread.join = _orig_join  # type: ignore[method-assign]


def _root_thread_done() -> None:
    """The main thread finished the program: it stops counting (and frees the baton)
    while the interpreter joins the remaining non-daemon threads."""
    rt = _runtime.ACTIVE
    if rt is None:
        return
    ts = rt.threads.get(threading.get_ident())
    if ts is not None and ts.tracked:
        rt.exit(ts)


def _start(self: threading.Thread) -> None:
    rt = _runtime.ACTIVE
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
        try:
            run()
        finally:
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
    rt = _runtime.ACTIVE
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
                deadline = rt.now_ns + max(0, seconds_to_ns(timeout))
            rt.park_locked(waiter, deadline)
            if waiter.state == _runtime.TIMEDOUT:
                if waiter in ts.joiners:
                    ts.joiners.remove(waiter)
                return None
    # The thread has left its run(): the rest of its exit is short and real.
    return _orig_join(self)
