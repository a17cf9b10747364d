"""Every interception mechanism, in the order activation installs them: the run-time
patches first (threads, fork, entropy: before any adapter, which may draw from it),
then the after-import adapters, then the facade's sockets (last, as the adapters of
libraries already imported run at once) and the server sockets' waits around them."""

from __future__ import annotations

from timewarp._core.intercept import (
    anyio,
    asyncio,
    entropy,
    fork,
    futures,
    incluster,
    logging,
    numpy,
    podnetwork,
    servers,
    sockets,
    threads,
    uuid,
)
from timewarp._core.intercept.base import Mechanism

MECHANISMS: tuple[Mechanism, ...] = (
    threads.MECHANISM,
    fork.MECHANISM,
    podnetwork.MECHANISM,
    entropy.MECHANISM,
    futures.MECHANISM,
    anyio.MECHANISM,
    asyncio.MECHANISM,
    logging.MECHANISM,
    uuid.MECHANISM,
    numpy.MECHANISM,
    sockets.MECHANISM,
    servers.MECHANISM,  # after the facade's sockets: their wrappers stay the inner ones
    incluster.MECHANISM,
)
