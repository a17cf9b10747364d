"""Virtual-time drop-ins for ``queue``: get/put timeouts and ``join`` are virtual waits.

The classes subclass the standard library's (``queue.Empty``/``queue.Full`` are raised
as usual); without a broker they are exactly the standard library's queues.
"""

from __future__ import annotations

import queue as _q
from collections import deque
from typing import Any

from timewarp._core.current import active, seconds_to_ns
from timewarp.vthreading import Condition, Lock

__all__ = ["Queue", "LifoQueue", "PriorityQueue", "SimpleQueue", "Empty", "Full"]

Empty = _q.Empty
Full = _q.Full


class Queue(_q.Queue):
    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._tw_rt = active()
        if self._tw_rt is not None:
            self.mutex = Lock()
            self.not_empty = Condition(self.mutex)
            self.not_full = Condition(self.mutex)
            self.all_tasks_done = Condition(self.mutex)

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        rt = self._tw_rt
        if rt is None:
            return super().put(item, block, timeout)
        with self.not_full:
            if self.maxsize > 0:
                if not block:
                    if self._qsize() >= self.maxsize:
                        raise Full
                elif timeout is None:
                    while self._qsize() >= self.maxsize:
                        self.not_full.wait()
                elif timeout < 0:
                    raise ValueError("'timeout' must be a non-negative number")
                else:
                    endtime = rt.now() + seconds_to_ns(timeout)
                    while self._qsize() >= self.maxsize:
                        remaining = (endtime - rt.now()) / 1e9
                        if remaining <= 0.0:
                            raise Full
                        self.not_full.wait(remaining)
            self._put(item)
            self.unfinished_tasks += 1
            self.not_empty.notify()
        return None

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        rt = self._tw_rt
        if rt is None:
            return super().get(block, timeout)
        with self.not_empty:
            if not block:
                if not self._qsize():
                    raise Empty
            elif timeout is None:
                while not self._qsize():
                    self.not_empty.wait()
            elif timeout < 0:
                raise ValueError("'timeout' must be a non-negative number")
            else:
                endtime = rt.now() + seconds_to_ns(timeout)
                while not self._qsize():
                    remaining = (endtime - rt.now()) / 1e9
                    if remaining <= 0.0:
                        raise Empty
                    self.not_empty.wait(remaining)
            item = self._get()
            self.not_full.notify()
            return item


class LifoQueue(Queue, _q.LifoQueue):
    pass


class PriorityQueue(Queue, _q.PriorityQueue):
    pass


class SimpleQueue(_q.SimpleQueue):
    """``queue.SimpleQueue`` (unbounded FIFO) with a virtual ``get(timeout=...)``."""

    def __init__(self) -> None:
        self._tw_rt = active()
        if self._tw_rt is not None:
            self._tw_items: deque[Any] = deque()
            self._tw_cond = Condition(Lock())

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        if self._tw_rt is None:
            return super().put(item, block, timeout)
        with self._tw_cond:
            self._tw_items.append(item)
            self._tw_cond.notify()
        return None

    def put_nowait(self, item: Any) -> None:
        self.put(item, False)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        rt = self._tw_rt
        if rt is None:
            return super().get(block, timeout)
        if timeout is not None and timeout < 0:
            raise ValueError("'timeout' must be a non-negative number")
        with self._tw_cond:
            if not block or timeout == 0:
                if not self._tw_items:
                    raise Empty
            elif timeout is None:
                while not self._tw_items:
                    self._tw_cond.wait()
            else:
                endtime = rt.now() + seconds_to_ns(timeout)
                while not self._tw_items:
                    remaining = (endtime - rt.now()) / 1e9
                    if remaining <= 0.0:
                        raise Empty
                    self._tw_cond.wait(remaining)
            return self._tw_items.popleft()

    def get_nowait(self) -> Any:
        return self.get(False)

    def empty(self) -> bool:
        return super().empty() if self._tw_rt is None else not self._tw_items

    def qsize(self) -> int:
        return super().qsize() if self._tw_rt is None else len(self._tw_items)
