"""What a mechanism is, and the after-import finder that adjusts a library right after
the program first imports it (or at once, if it already has)."""

from __future__ import annotations

import importlib.abc
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from timewarp._core import runtime as _runtime

Adapter = Callable[[types.ModuleType], None]


@dataclass(frozen=True)
class Mechanism:
    """One way the runtime reaches code it did not rewrite: patched at run time when
    the runtime turns on (``patch``), or adjusted after import (``after_import``: module
    name -> adapter, called with the module once it has run)."""

    name: str
    patch: Callable[[_runtime.Runtime], None] | None = None
    after_import: Mapping[str, Adapter] = field(default_factory=dict)

    def install(self, rt: _runtime.Runtime) -> None:
        if self.patch is not None:
            self.patch(rt)
        if self.after_import:
            when_imported(dict(self.after_import))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``hooks[name](module)`` right after ``name`` is first executed. Other finders
    may consult this one while they look (the patcher's does): a spec is handed out for
    as long as the module has not run, and a lookup in progress does not recurse."""

    def __init__(self, hooks: dict[str, Adapter]) -> None:
        self.hooks = hooks
        self._looking: set[str] = set()

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        hook = self.hooks.get(fullname)
        if hook is None or fullname in self._looking:
            return None
        self._looking.add(fullname)
        try:
            spec = None
            for finder in list(sys.meta_path):
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(fullname, path, target)
                    if spec is not None:
                        break
        finally:
            self._looking.discard(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_hook(module: types.ModuleType) -> None:
            exec_module(module)
            if self.hooks.pop(fullname, None) is not None:
                if not self.hooks and self in sys.meta_path:
                    sys.meta_path.remove(self)
                hook(module)

        loader.exec_module = exec_then_hook  # type: ignore[method-assign]
        return spec


def when_imported(hooks: dict[str, Adapter]) -> None:
    """Each ``hooks[name](module)``: now if ``name`` is imported, else right after."""
    pending = {}
    for name, hook in hooks.items():
        module = sys.modules.get(name)
        if module is not None:
            hook(module)
        else:
            pending[name] = hook
    if pending:
        sys.meta_path.insert(0, _AfterImport(pending))
