"""A virtual-time asyncio event loop (in the spirit of looptime).

``loop.time()`` is virtual monotonic time, so everything built on it — ``sleep``,
``wait_for``, ``wait(timeout=)``, ``timeout``/``timeout_at``, ``call_later``/``call_at`` —
follows virtual time, inside libraries too. When the loop would block in its selector
with a timeout, the loop thread instead registers a virtual timer with the broker and
blocks in the real selector with no timeout; the broker's wake-up (or
``call_soon_threadsafe`` from another thread) interrupts it through the loop's self-pipe.

The loop's waits on API connections are API reads, with the same ledger as a thread's
(``timewarp._core.aionet``): reported to the broker before the loop blocks, readable only
as far as the broker allowed, delivered whole and in the broker's order — with or without
TLS. Timers due at one instant run in the order they were scheduled, as in asyncio.

Under a broker the runtime installs :class:`VirtualEventLoopPolicy` process-wide, so
loops created by unpatched code are virtual too. Limit: a loop that waits on real sockets
other than the API facade's (e.g. an external database) is a block the broker cannot see.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

from timewarp._core import aionet, current, servers
from timewarp._core import runtime as _runtime
from timewarp._core.current import active

__all__ = [
    "VirtualEventLoop",
    "VirtualEventLoopPolicy",
    "new_event_loop",
    "run",
    "Runner",
    "get_event_loop",
]

T = TypeVar("T")
_NS = 1_000_000_000


class _VirtualSelector(selectors.BaseSelector):
    def __init__(self, real: selectors.BaseSelector, loop: VirtualEventLoop) -> None:
        self._real = real
        self._loop = loop

    def register(self, fileobj, events, data=None):  # type: ignore[no-untyped-def]
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj):  # type: ignore[no-untyped-def]
        return self._real.unregister(fileobj)

    def modify(self, fileobj, events, data=None):  # type: ignore[no-untyped-def]
        return self._real.modify(fileobj, events, data)

    def get_key(self, fileobj):  # type: ignore[no-untyped-def]
        return self._real.get_key(fileobj)

    def get_map(self):  # type: ignore[no-untyped-def]
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None):  # type: ignore[no-untyped-def]
        rt = self._loop._tw_rt
        plan = aionet.SelectPlan(self._real, gated_reads=rt.reads_gated())
        ready = plan.ready()
        if ready or (timeout is not None and timeout <= 0):
            return ready + self._outside(self._select_hidden(plan, 0))
        events = self._outside(self._select_hidden(plan, 0))
        if events:
            return events
        deadline = None
        if timeout is not None:
            deadline = rt.now() + max(1, math.ceil(timeout * _NS))
        waiter = _runtime.Waiter(rt.current())
        waiter.on_wake = self._loop._tw_interrupt
        self._loop._tw_waiter = waiter
        rt.begin_external_wait(waiter, deadline, plan.reported, plan.real_io)
        try:
            events = self._select_hidden(plan, None)
        finally:
            self._loop._tw_waiter = None
            rt.end_external_wait(waiter)
        return plan.ready() + self._outside(events)

    def _outside(self, events):  # type: ignore[no-untyped-def]
        """Events of server sockets are input from outside: reported (``servers``)."""
        servers.note_loop_events(self._loop._tw_rt, events)
        return events

    def _select_hidden(self, plan: aionet.SelectPlan, timeout: float | None):  # type: ignore[no-untyped-def]
        """The real select, without the read interest the broker decides."""
        plan.hide()
        try:
            return self._real.select(timeout)
        finally:
            plan.restore()


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop on the virtual clock (only under a broker)."""

    def __init__(self) -> None:
        rt = active()
        if rt is None:
            raise RuntimeError("VirtualEventLoop needs a broker (TIMEWARP_CLOCK is not set)")
        self._tw_rt = rt
        self._tw_waiter: _runtime.Waiter | None = None
        super().__init__(_VirtualSelector(selectors.DefaultSelector(), self))
        self._clock_resolution = 1e-6

    def time(self) -> float:
        return (self._tw_rt.mono_ns + self._tw_rt.now()) / _NS

    def _tw_interrupt(self) -> None:
        super()._write_to_self()

    def _write_to_self(self) -> None:
        waiter = self._tw_waiter
        if waiter is not None:
            rt = self._tw_rt
            with rt.lock:
                if rt.wake_locked(waiter, _runtime.NOTIFIED):
                    return  # wake_locked wrote to the self-pipe
        super()._write_to_self()


class VirtualEventLoopPolicy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return new_event_loop()


def new_event_loop() -> asyncio.AbstractEventLoop:
    """``asyncio.new_event_loop()``: virtual under a broker."""
    if active() is None:
        return asyncio.new_event_loop()
    return VirtualEventLoop()


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """``asyncio.run()`` on a virtual-time loop under a broker."""
    if active() is None:
        return asyncio.run(main, debug=debug)
    with asyncio.Runner(debug=debug, loop_factory=new_event_loop) as runner:
        return runner.run(main)


class Runner(asyncio.Runner):
    """``asyncio.Runner`` whose default loop factory is virtual under a broker."""

    def __init__(self, *, debug: bool | None = None, loop_factory=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(debug=debug, loop_factory=loop_factory or new_event_loop)


def get_event_loop() -> asyncio.AbstractEventLoop:
    """``asyncio.get_event_loop()``; under a broker the policy makes new loops virtual."""
    if active() is not None and not isinstance(
        asyncio.get_event_loop_policy(), VirtualEventLoopPolicy
    ):
        asyncio.set_event_loop_policy(VirtualEventLoopPolicy())
    return asyncio.get_event_loop()


def install_policy() -> None:
    """Idempotent: a policy already in place keeps its loops."""
    aionet.patch_asyncio()
    if not isinstance(asyncio.get_event_loop_policy(), VirtualEventLoopPolicy):
        asyncio.set_event_loop_policy(VirtualEventLoopPolicy())


if current.ACTIVE is not None:
    install_policy()  # imported first by patched code: asyncio came in through us
