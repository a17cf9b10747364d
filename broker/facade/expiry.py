"""Objects that live a while: kube-apiserver stores Events with a lease of ``--event-ttl``
(1 h by default), renewed by each write, and etcd removes them when it runs out. Here
the deadlines are virtual time; the store removes what is due before each create (a
simulation writes all the time; a reader, kubectl say, removes nothing, so looking never
changes the run)."""

from __future__ import annotations

import heapq
import itertools


class Expiry:
    """Deadlines (virtual ns) of stored objects, the last write's one counting."""

    def __init__(self) -> None:
        # (deadline, write order, what): ``what`` is the same tuple as the deadline's key
        # (one per live Event, ~190k at 10k nodes, not two)
        self._heap: list[tuple[int, int, tuple[str, str, str]]] = []
        self._deadline: dict[tuple[str, str, str], int] = {}
        self._seq = itertools.count()

    def set(self, key: str, namespace: str, name: str, deadline_ns: int) -> None:
        """``(key, namespace, name)`` expires at ``deadline_ns`` (replacing an earlier one)."""
        what = (key, namespace, name)
        self._deadline[what] = deadline_ns
        heapq.heappush(self._heap, (deadline_ns, next(self._seq), what))

    def forget(self, key: str, namespace: str, name: str) -> None:
        self._deadline.pop((key, namespace, name), None)

    def due(self, now_ns: int) -> list[tuple[str, str, str]]:
        """What expired by ``now_ns``, in deadline order (then write order); forgotten."""
        out = []
        heap = self._heap
        while heap and heap[0][0] <= now_ns:
            deadline, _, what = heapq.heappop(heap)
            if self._deadline.get(what) == deadline:
                del self._deadline[what]
                out.append(what)
        return out

    def __len__(self) -> int:
        return len(self._deadline)
