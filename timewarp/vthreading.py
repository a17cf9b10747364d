"""Virtual-time drop-ins for ``threading``'s blocking primitives.

Each class subclasses the standard library's (isinstance checks and subclassing keep
working). The mode is fixed when the object is created: with no broker configured it is
exactly the standard library's object; under a broker, waits and timeouts are virtual
waits of the runtime (see ``timewarp._runtime``), and a timeout of ``t`` seconds ends at
exactly ``now + t`` of virtual time.

``Thread`` is the standard class itself: the runtime hooks ``Thread.start``/``join`` for
every thread of the process, so rewriting ``class W(threading.Thread)`` changes nothing.
"""

from __future__ import annotations

import threading as _th
from collections import deque
from collections.abc import Callable
from typing import Any

from timewarp._core import runtime as _runtime
from timewarp._core.current import active, seconds_to_ns

__all__ = [
    "Thread",
    "Timer",
    "Event",
    "Condition",
    "Lock",
    "RLock",
    "Semaphore",
    "BoundedSemaphore",
    "Barrier",
    "BrokenBarrierError",
]

Thread = _th.Thread
BrokenBarrierError = _th.BrokenBarrierError
_Waiter = _runtime.Waiter
_NOTIFIED = _runtime.NOTIFIED
_TIMEDOUT = _runtime.TIMEDOUT


def _deadline(rt: _runtime.Runtime, timeout: float | None) -> int | None:
    if timeout is None:
        return None
    return rt.now() + max(0, seconds_to_ns(timeout))


def _check_acquire_args(blocking: bool, timeout: float) -> None:
    if not blocking and timeout != -1:
        raise ValueError("can't specify a timeout for a non-blocking call")
    if timeout < 0 and timeout != -1:
        raise ValueError("timeout value must be a non-negative number")


class _VirtualLock:
    """A non-reentrant lock whose contended acquire is a virtual wait. Release hands the
    lock straight to the longest waiter (FIFO), which keeps runs reproducible."""

    __slots__ = ("_rt", "_locked", "_waiters", "__weakref__")

    def __init__(self, rt: _runtime.Runtime) -> None:
        self._rt = rt
        self._locked = False
        self._waiters: deque[_runtime.Waiter] = deque()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        _check_acquire_args(blocking, timeout)
        rt = self._rt
        with rt.lock:
            if not self._locked:
                self._locked = True
                return True
            if not blocking:
                return False
            waiter = _Waiter(rt.current())
            self._waiters.append(waiter)
            rt.park_locked(
                waiter, None if timeout == -1 else rt.now_ns + seconds_to_ns(timeout), sync=True
            )
            if waiter.state == _NOTIFIED:
                return True  # ownership was handed to us
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            return False

    def release(self) -> None:
        rt = self._rt
        with rt.lock:
            if not self._locked:
                raise RuntimeError("release unlocked lock")
            while self._waiters:
                if rt.wake_locked(self._waiters.popleft(), _NOTIFIED):
                    return
            self._locked = False

    def locked(self) -> bool:
        return self._locked

    def _is_owned(self) -> bool:
        return self._locked

    def _at_fork_reinit(self) -> None:
        self._locked = False
        self._waiters.clear()

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<timewarp virtual {'locked' if self._locked else 'unlocked'} lock>"


class _VirtualRLock:
    """A reentrant lock: owner + count, contended acquire is a virtual wait."""

    __slots__ = ("_rt", "_owner", "_count", "_waiters", "__weakref__")

    def __init__(self, rt: _runtime.Runtime) -> None:
        self._rt = rt
        self._owner: int | None = None
        self._count = 0
        self._waiters: deque[tuple[_runtime.Waiter, int]] = deque()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        _check_acquire_args(blocking, timeout)
        rt = self._rt
        me = _th.get_ident()
        with rt.lock:
            if self._owner == me:
                self._count += 1
                return True
            if self._owner is None:
                self._owner, self._count = me, 1
                return True
            if not blocking:
                return False
            waiter = _Waiter(rt.current())
            entry = (waiter, me)
            self._waiters.append(entry)
            rt.park_locked(
                waiter, None if timeout == -1 else rt.now_ns + seconds_to_ns(timeout), sync=True
            )
            if waiter.state == _NOTIFIED:
                return True
            if entry in self._waiters:
                self._waiters.remove(entry)
            return False

    def release(self) -> None:
        with self._rt.lock:
            if self._owner != _th.get_ident():
                raise RuntimeError("cannot release un-acquired lock")
            self._count -= 1
            if self._count == 0:
                self._hand_over_locked()

    def _hand_over_locked(self) -> None:
        self._owner = None
        while self._waiters:
            waiter, ident = self._waiters.popleft()
            if self._rt.wake_locked(waiter, _NOTIFIED):
                self._owner, self._count = ident, 1
                return

    # Condition support: release completely, then restore the count.
    def _release_save(self) -> tuple[int, int | None]:
        with self._rt.lock:
            if self._owner != _th.get_ident():
                raise RuntimeError("cannot release un-acquired lock")
            state = (self._count, self._owner)
            self._count = 0
            self._hand_over_locked()
            return state

    def _acquire_restore(self, state: tuple[int, int | None]) -> None:
        self.acquire()
        with self._rt.lock:
            self._count, self._owner = state

    def _is_owned(self) -> bool:
        return self._owner == _th.get_ident()

    def _at_fork_reinit(self) -> None:
        self._owner, self._count = None, 0
        self._waiters.clear()

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"<timewarp virtual RLock owner={self._owner} count={self._count}>"


def Lock() -> Any:  # noqa: N802 - the stdlib's name
    """``threading.Lock()``: a real lock without a broker, a virtual one under it."""
    rt = active()
    return _th.Lock() if rt is None else _VirtualLock(rt)


def RLock(*args: Any, **kwargs: Any) -> Any:  # noqa: N802
    """``threading.RLock()``: a real one without a broker, a virtual one under it."""
    rt = active()
    return _th.RLock(*args, **kwargs) if rt is None else _VirtualRLock(rt)


class Condition(_th.Condition):
    """``threading.Condition`` whose waits are virtual (and FIFO-notified)."""

    def __init__(self, lock: Any = None) -> None:
        rt = active()
        self._tw_rt = rt
        if rt is None:
            super().__init__(lock)
            return
        if lock is None:
            lock = _VirtualRLock(rt)
        super().__init__(lock)
        self._waiters = deque()  # of runtime Waiters

    def wait(self, timeout: float | None = None) -> bool:
        rt = self._tw_rt
        if rt is None:
            return super().wait(timeout)
        if not self._is_owned():
            raise RuntimeError("cannot wait on un-acquired lock")
        waiter = _Waiter(rt.current())
        # Before taking rt.lock: in free mode now() is a round trip that needs it.
        deadline = _deadline(rt, timeout)
        with rt.lock:
            self._waiters.append(waiter)
        saved = self._release_save()
        try:
            with rt.lock:
                rt.park_locked(waiter, deadline, sync=True)
                if waiter.state != _NOTIFIED and waiter in self._waiters:
                    self._waiters.remove(waiter)
        finally:
            self._acquire_restore(saved)
        return waiter.state == _NOTIFIED

    def wait_for(self, predicate: Callable[[], Any], timeout: float | None = None) -> Any:
        rt = self._tw_rt
        if rt is None:
            return super().wait_for(predicate, timeout)
        endtime = None
        waittime = timeout
        result = predicate()
        while not result:
            if waittime is not None:
                if endtime is None:
                    endtime = rt.now() + seconds_to_ns(waittime)
                else:
                    waittime = (endtime - rt.now()) / 1e9
                    if waittime <= 0:
                        break
            self.wait(waittime)
            result = predicate()
        return result

    def notify(self, n: int = 1) -> None:
        rt = self._tw_rt
        if rt is None:
            return super().notify(n)
        if not self._is_owned():
            raise RuntimeError("cannot notify on un-acquired lock")
        with rt.lock:
            woken = 0
            while woken < n and self._waiters:
                if rt.wake_locked(self._waiters.popleft(), _NOTIFIED):
                    woken += 1
        return None

    def notify_all(self) -> None:
        self.notify(len(self._waiters) or 1)

    notifyAll = notify_all  # noqa: N815 - the stdlib's alias


class Event(_th.Event):
    """``threading.Event`` with a virtual ``wait(timeout)``."""

    def __init__(self) -> None:
        super().__init__()
        if active() is not None:
            self._cond = Condition(Lock())


class Semaphore(_th.Semaphore):
    """``threading.Semaphore`` with a virtual ``acquire(timeout=...)``."""

    def __init__(self, value: int = 1) -> None:
        super().__init__(value)
        self._tw_rt = active()
        if self._tw_rt is not None:
            self._cond = Condition(Lock())

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        rt = self._tw_rt
        if rt is None:
            return super().acquire(blocking, timeout)
        if not blocking and timeout is not None:
            raise ValueError("can't specify timeout for non-blocking acquire")
        rc = False
        endtime = None
        with self._cond:
            while self._value == 0:
                if not blocking:
                    break
                if timeout is not None:
                    if endtime is None:
                        endtime = rt.now() + seconds_to_ns(timeout)
                    else:
                        timeout = (endtime - rt.now()) / 1e9
                        if timeout <= 0:
                            break
                self._cond.wait(timeout)
            else:
                self._value -= 1
                rc = True
        return rc

    __enter__ = acquire


class BoundedSemaphore(Semaphore):
    """``threading.BoundedSemaphore`` with a virtual ``acquire(timeout=...)``."""

    def __init__(self, value: int = 1) -> None:
        super().__init__(value)
        self._initial_value = value

    def release(self, n: int = 1) -> None:
        if n < 1:
            raise ValueError("n must be one or more")
        with self._cond:
            if self._value + n > self._initial_value:
                raise ValueError("Semaphore released too many times")
            self._value += n
            for _ in range(n):
                self._cond.notify()


class Barrier(_th.Barrier):
    """``threading.Barrier`` whose ``wait(timeout)`` is virtual."""

    def __init__(
        self, parties: int, action: Callable[[], None] | None = None, timeout: float | None = None
    ) -> None:
        super().__init__(parties, action, timeout)
        if active() is not None:
            self._cond = Condition(Lock())


class Timer(_th.Timer):
    """``threading.Timer``: fires after ``interval`` seconds of virtual time."""

    def __init__(self, interval: float, function: Callable[..., Any], args=None, kwargs=None):
        super().__init__(interval, function, args, kwargs)
        if active() is not None:
            self.finished = Event()
