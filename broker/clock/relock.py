"""Taking the service's lock back after the driver let it go for a blocking stretch.

The driver runs in the command's main thread, where the first stop signal's handler
raises (``commands.stopping``). ``threading`` lets that exception out of a blocking
``acquire()`` *without* the lock: code of the form ``release(); try: … finally:
acquire()`` then leaves the enclosing ``with cond:`` releasing a lock it does not hold
(``RuntimeError: cannot release un-acquired lock``), and the run ends as a bug in
timewarp instead of as interrupted. ``Condition.wait`` is immune (its re-acquire cannot
be interrupted); the driver's own waits that read the runtimes' connections, and the
hook it runs unlocked, go through :func:`let_go` and :func:`take_back` instead.
"""

from __future__ import annotations

import threading

from timewarp.wire.lockback import take_back

__all__ = ["let_go", "take_back"]


def let_go(cond: threading.Condition) -> None:
    """Release the lock (held once). Call it *inside* the ``try`` whose ``finally`` calls
    :func:`take_back`: an exception raised just after the release is then still
    followed by taking the lock back."""
    cond.release()
