"""Objects that live a while: kube-apiserver stores Events with a lease of ``--event-ttl``
(1 h by default), renewed by each write, and etcd removes them when it runs out. Here
the deadlines are virtual time; the store removes what is due before each create (a
simulation writes all the time; a reader, kubectl say, removes nothing, so looking never
changes the run)."""

from __future__ import annotations

import heapq
import itertools
from collections import deque


class Expiry:
    """Deadlines (virtual ns) of stored objects, the last write's one counting.

    With one time to live (Events' only, today) deadlines come in write order: they are
    kept in a queue, ``(deadline, what)`` per write, ``what`` the deadline's own key tuple
    (~190k live Events at 10k nodes). A deadline earlier than the last one (another time
    to live) turns the queue into a heap ordered by (deadline, write order), as before."""

    def __init__(self) -> None:
        self._queue: deque[tuple[int, tuple[str, str, str]]] = deque()
        self._heap: list[tuple[int, int, tuple[str, str, str]]] | None = None
        self._deadline: dict[tuple[str, str, str], int] = {}
        self._seq = itertools.count()

    def set(self, key: str, namespace: str, name: str, deadline_ns: int) -> None:
        """``(key, namespace, name)`` expires at ``deadline_ns`` (replacing an earlier one)."""
        what = (key, namespace, name)
        self._deadline[what] = deadline_ns
        queue = self._queue
        if self._heap is None:
            if not queue or queue[-1][0] <= deadline_ns:
                queue.append((deadline_ns, what))
                return
            # write order is the queue's: sorted by (deadline, order), already a heap
            self._heap = [(d, next(self._seq), w) for d, w in queue]
            queue.clear()
        heapq.heappush(self._heap, (deadline_ns, next(self._seq), what))

    def forget(self, key: str, namespace: str, name: str) -> None:
        self._deadline.pop((key, namespace, name), None)

    def due(self, now_ns: int) -> list[tuple[str, str, str]]:
        """What expired by ``now_ns``, in deadline order (then write order); forgotten."""
        out = []
        deadlines = self._deadline
        heap, queue = self._heap, self._queue
        while True:
            if heap is None:
                if not queue or queue[0][0] > now_ns:
                    break
                deadline, what = queue.popleft()
            else:
                if not heap or heap[0][0] > now_ns:
                    break
                deadline, _, what = heapq.heappop(heap)
            if deadlines.get(what) == deadline:
                del deadlines[what]
                out.append(what)
        return out

    def __len__(self) -> int:
        return len(self._deadline)
