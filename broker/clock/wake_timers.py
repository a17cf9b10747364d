"""Virtual-time wake-ups for the broker's controllers: at most one timer per instant for
one controlled object, all cancelled together when the object goes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class WakeTimers:
    """The pending wake-ups of one object (a Job, a ReplicaSet, a Deployment)."""

    def __init__(self) -> None:
        self._by_deadline: dict[int, Any] = {}

    def wake_at(self, clock: Any, deadline_ns: int, wake: Callable[[], None]) -> None:
        """Call ``wake`` (in the driver's thread) at ``deadline_ns``, once per instant."""
        if deadline_ns in self._by_deadline:
            return

        def fire() -> None:
            self._by_deadline.pop(deadline_ns, None)
            wake()

        self._by_deadline[deadline_ns] = clock.call_at(deadline_ns, fire)

    def cancel(self) -> None:
        for timer in self._by_deadline.values():
            timer.cancel()
        self._by_deadline.clear()
