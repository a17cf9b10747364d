"""A stand-in for a module as one library sees it: a few names overridden (the virtual
clock's, the virtual primitives), everything else the real module's. Given to one
module's global (``concurrent.futures._base.threading``, ``logging.time``) so that only
that library's readings or waits change, never the module every other caller shares."""

from __future__ import annotations

import types


class ModuleShim(types.ModuleType):
    """Overrides first, then the real module."""

    def __init__(self, real: types.ModuleType, overrides: dict) -> None:
        super().__init__(real.__name__)
        self.__dict__.update(overrides)
        self._tw_real = real

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._tw_real, name)
