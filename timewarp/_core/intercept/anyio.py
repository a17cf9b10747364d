"""Adjusted at import: anyio's worker threads (``to_thread.run_sync``: httpx's async
clients, kr8s) wait for work on a stdlib ``queue.Queue``: a virtual one, like
concurrent.futures'."""

from __future__ import annotations

import types

from timewarp._core.intercept.base import Mechanism


def _virtualize_backend(backend: types.ModuleType) -> None:
    from timewarp import vqueue  # loaded with the library, not at activation

    backend.Queue = vqueue.Queue  # type: ignore[attr-defined]


MECHANISM = Mechanism("anyio", after_import={"anyio._backends._asyncio": _virtualize_backend})
