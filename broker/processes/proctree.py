"""Every process a run started, wherever it went (Linux ``/proc``).

Killing a scheduler's process group misses what left it: a helper started with
``setsid``, or a daemon made the classic way (fork, setsid, fork), is in a session of its
own and, once its parent exits, a child of init. What such a process keeps is its
environment: each scheduler gets a per-run tag variable (:data:`TAG_ENV`), inherited by
everything it starts, and :func:`tagged` finds every live process that carries it — like
a cgroup, without needing one. A process that scrubs its whole environment escapes;
nothing else does. Elsewhere than Linux, :func:`tagged` finds nothing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import threading

TAG_ENV = "TIMEWARP_RUN_TAG"


def new_tag() -> str:
    return secrets.token_hex(8)


def tagged(tag: str) -> list[int]:
    """The live processes (zombies excluded) whose environment holds ``TAG_ENV=tag``."""
    needle = f"{TAG_ENV}={tag}".encode()
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        state = stat[stat.rfind(b")") + 2 :][:1]
        if state != b"Z" and needle in environ.split(b"\0"):
            found.append(int(name))
    return found


def terminate_tagged(tag: str, grace_s: float = 1.0) -> list[int]:
    """SIGTERM every process of the run, SIGKILL those left after ``grace_s``; returns
    the pids found (for a report)."""
    pids = tagged(tag)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    pause = threading.Event()
    for _ in range(max(1, int(grace_s / 0.05))):
        if not tagged(tag):
            return pids
        pause.wait(0.05)
    for pid in tagged(tag):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return pids
