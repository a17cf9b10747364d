"""``sched.scheduler`` whose default clock and delay are virtual."""

from __future__ import annotations

import sched as _sched
from collections.abc import Callable

from timewarp import vtime

__all__ = ["scheduler"]


class scheduler(_sched.scheduler):  # noqa: N801 - the stdlib's name
    def __init__(
        self,
        timefunc: Callable[[], float] = vtime.monotonic,
        delayfunc: Callable[[float], object] = vtime.sleep,
    ) -> None:
        super().__init__(timefunc, delayfunc)
