"""Every interception mechanism, in the order activation installs them: the run-time
patches first (threads, fork), then the after-import adapters, then the facade's
sockets (last, as the adapters of libraries already imported run at once)."""

from __future__ import annotations

from timewarp._core.intercept import anyio, asyncio, fork, futures, logging, sockets, threads
from timewarp._core.intercept.base import Mechanism

MECHANISMS: tuple[Mechanism, ...] = (
    threads.MECHANISM,
    fork.MECHANISM,
    futures.MECHANISM,
    anyio.MECHANISM,
    asyncio.MECHANISM,
    logging.MECHANISM,
    sockets.MECHANISM,
)
