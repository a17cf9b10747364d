"""What the runtime costs its process, and ``--profile``: figures only, never fed back.

**Runtime CPU.** The CPU time a process spends in timewarp's runtime is the CPU of its
clock thread (the loop that talks to the broker: all of it is the runtime's) plus the
thread CPU time spent inside the runtime's hand-offs — every virtual wait
(``Runtime.park_locked``: parking, handing the baton on, taking it back) and the gates of
the API facade's sockets — measured with ``time.thread_time_ns`` around them
(:func:`timed`; nested ones count once). Clock reads themselves (a cached integer) are
not timed: timing them would cost more than they do. Nothing here is read by the runtime
or the broker to decide anything: the figures go to the summary and manifest only.

**Profiles.** With ``TIMEWARP_PROFILE_DIR`` set (``timewarp simulate --profile``), every
tracked thread of the process runs under its own ``cProfile.Profile`` from the moment the
runtime starts (the main thread) or the thread starts; when the broker asks for the
process's figures at the end of the run, the profiles are merged and written to
``<dir>/profile-<process name>.prof`` (``python -m pstats``, snakeviz), in CPU time of
each thread (a thread parked in a virtual wait costs nothing). Profiling slows the
process down; in deterministic time that changes no output.
"""

from __future__ import annotations

import _thread
import os
import threading
import time as _time
from collections.abc import Callable
from typing import Any, TypeVar

from timewarp.wire.clockproto import ENV_PROFILE_DIR

_F = TypeVar("_F", bound=Callable[..., Any])
_local = threading.local()
# Runtime CPU of program threads: one cell [spent_ns, inside] per live thread that entered
# a hook, written by that thread only (no lock per hook: a hook runs at every hand-off);
# figures() sums them under the lock. When a thread ends, its thread-local data goes and
# its _Owner folds the cell into _ended: a program that starts a thread per connection
# keeps one cell per live thread, not one per thread it ever ran.
_cells: dict[int, list[int]] = {}  # id(cell) -> cell
_ended = [0]  # spent_ns of the threads that ended
_cells_lock = _thread.allocate_lock()  # the real one, whatever the drop-ins do
_thread_time_ns = _time.thread_time_ns


class _Owner:
    """Held in a thread's local data only: freed when that thread ends (CPython clears a
    thread's locals at its exit, in that thread, which then holds no lock of ours)."""

    __slots__ = ("cell",)

    def __init__(self, cell: list[int]) -> None:
        self.cell = cell

    def __del__(self, _lock: Any = _cells_lock, _cells: Any = _cells, _ended: Any = _ended) -> None:
        # (defaults: module globals may be gone when the main thread's locals go at exit)
        with _lock:
            _ended[0] += self.cell[0]
            _cells.pop(id(self.cell), None)


def _new_cell() -> list[int]:
    cell = [0, 0]
    with _cells_lock:
        _cells[id(cell)] = cell
    _local.owner = _Owner(cell)
    _local.cell = cell
    return cell


def timed(fn: _F) -> _F:
    """Count the thread CPU time of ``fn`` as the runtime's (outermost call only)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            cell = _local.cell
        except AttributeError:
            cell = _new_cell()
        if cell[1]:
            return fn(*args, **kwargs)
        cell[1] = 1
        start = _thread_time_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            cell[0] += _thread_time_ns() - start
            cell[1] = 0

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def thread_cpu_ns(ident: int | None) -> int:
    """CPU time of thread ``ident`` (0 when unknown or gone)."""
    if ident is None:
        return 0
    try:
        return _time.clock_gettime_ns(_time.pthread_getcpuclockid(ident))
    except (OSError, AttributeError, OverflowError):
        return 0


def figures(clock_thread: int | None) -> dict[str, int]:
    """``runtime_cpu_ns`` (hooks + the clock thread) and ``process_cpu_ns`` (the whole
    process, user + system), read now."""
    with _cells_lock:
        hooks = _ended[0] + sum(cell[0] for cell in _cells.values())
    return {
        "runtime_cpu_ns": hooks + thread_cpu_ns(clock_thread),
        "process_cpu_ns": _time.process_time_ns(),
    }


# --- profiles ---------------------------------------------------------------------------
_profiles: list[Any] = []  # one cProfile.Profile per profiled thread, running or ended


def profiling() -> bool:
    return bool(os.environ.get(ENV_PROFILE_DIR))


def start_thread_profile() -> None:
    """Profile the calling thread from now on (when profiling)."""
    if not profiling() or getattr(_local, "profile", None) is not None:
        return
    import cProfile

    # the thread's CPU clock, not the wall's: a thread parked in a virtual wait costs
    # nothing, and the wall time of a simulated run is mostly such waits
    profile = cProfile.Profile(_time.thread_time_ns, 1e-9)
    _local.profile = profile
    _profiles.append(profile)
    profile.enable()


def stop_thread_profile() -> None:
    profile = getattr(_local, "profile", None)
    if profile is not None:
        profile.disable()
        _local.profile = None


_owner_pid = os.getpid()  # a forked child (it inherits the profiles) never writes them


def write_profile(process: str) -> str:
    """Merge every thread's profile into ``<dir>/profile-<process>.prof``; its path, or
    "" when not profiling (or nothing was profiled, or this is a forked child)."""
    if not profiling() or not _profiles or os.getpid() != _owner_pid:
        return ""
    import pstats

    stats = None
    for profile in list(_profiles):
        profile.snapshot_stats()  # (threads are parked: the run is over)
        if not profile.stats:
            continue
        if stats is None:
            stats = pstats.Stats(profile)
        else:
            stats.add(profile)
    if stats is None:
        return ""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in process)
    path = os.path.join(os.environ[ENV_PROFILE_DIR], f"profile-{safe}.prof")
    tmp = f"{path}.tmp{os.getpid()}"
    stats.dump_stats(tmp)
    os.replace(tmp, path)
    return path
