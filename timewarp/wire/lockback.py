"""Taking a lock back after letting it go for a wait, through a signal handler's exception.

In the main thread a signal handler's exception (a command's first stop signal, a
program's SIGTERM → ``SystemExit``) leaves a blocking ``acquire()`` *without* the lock,
or comes right after one that took it, or right before a ``release()``. Code of the
form ``release(); try: … finally: acquire()`` then leaves the enclosing ``with lock:``
releasing a lock it does not hold ("cannot release un-acquired lock", or another
thread's lock released under it), or blocks for ever on a second acquire. Used by the
broker's driver (``broker/clock/relock.py``, a ``Condition``) and the runtime's virtual
waits (``timewarp/_core/runtime.py``, an ``RLock``). It lives in ``timewarp.wire`` (what
every layer may import) because both sides have such waits.
"""

from __future__ import annotations

from typing import Any


def take_back(lock: Any) -> None:
    """Hold ``lock`` again (if this thread let it go), then raise what a signal handler
    raised while this thread waited for it — never without the lock. ``lock``: one that
    says whether this thread holds it (``_is_owned``: an ``RLock`` or a ``Condition``),
    held at most once."""
    raised: BaseException | None = None
    while not lock._is_owned():
        try:
            lock.acquire()
        except BaseException as exc:  # noqa: BLE001 — a signal handler's; raised once held
            raised = exc
    if raised is not None:
        raise raised
