"""Give the calling thread its Python name at the OS level (Linux ``/proc/PID/task/TID/comm``).

Python 3.11 leaves every thread's OS name as the process's, so an outside observer
(``top -H``, ``benchmarks/scale_cost.py`` reading ``/proc``) cannot tell the embedded
simulator from the broker's other threads. Best effort: elsewhere, or if ``prctl`` is
unavailable, nothing happens.
"""

from __future__ import annotations

import contextlib
import sys
import threading

PR_SET_NAME = 15
COMM_MAX = 15  # the kernel keeps 15 bytes of a thread's name


def name_os_thread(name: str | None = None) -> None:
    """Set the calling thread's OS name to ``name`` (default: its ``threading`` name)."""
    if not sys.platform.startswith("linux"):
        return
    raw = (name or threading.current_thread().name).encode()[:COMM_MAX]
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, ctypes.c_char_p(raw), 0, 0, 0)
