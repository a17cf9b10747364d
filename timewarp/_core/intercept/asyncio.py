"""Adjusted at import: asyncio's loops become virtual-time loops (the drop-in
``timewarp.vasyncio`` installs its event-loop policy). Done when the program first
imports asyncio: importing it costs tens of ms that a program without it should not pay."""

from __future__ import annotations

import sys
import types

from timewarp._core.intercept.base import Mechanism


def _virtualize(_asyncio: types.ModuleType) -> None:
    partial = sys.modules.get("timewarp.vasyncio")
    if partial is not None and not hasattr(partial, "install_policy"):
        return  # vasyncio itself is importing asyncio: it installs the policy when done
    from timewarp import vasyncio

    vasyncio.install_policy()


MECHANISM = Mechanism("asyncio", after_import={"asyncio": _virtualize})
