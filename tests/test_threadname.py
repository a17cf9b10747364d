"""commands/threadname.py: the OS sees a thread's Python name, so /proc can attribute its CPU
(benchmarks/scale_cost.py splits the embedded simulator from the broker this way)."""

from __future__ import annotations

import sys
import threading

import pytest

from commands.threadname import name_os_thread
from experiments._common import _task_stats


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_a_named_thread_shows_its_name_in_proc() -> None:
    named = threading.Event()
    done = threading.Event()

    def body() -> None:
        name_os_thread()
        named.set()
        done.wait(10)

    t = threading.Thread(target=body, name="timewarp-sim-and-more")
    t.start()
    try:
        assert named.wait(10)
        import os

        names = {tid: name for tid, (name, _) in _task_stats(os.getpid()).items()}
        assert names[t.native_id] == "timewarp-sim-an"  # the kernel keeps 15 bytes
    finally:
        done.set()
        t.join(10)
