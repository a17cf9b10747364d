"""libcst codemods that route time, threading, queue, sched and asyncio calls to the
timewarp runtime, and the import hook that applies them at import time.

Public surface (import the submodule you need; this package imports nothing eagerly, so
a cached import-hook run never loads libcst):

- :mod:`patcher.targets` -- the one table of rewritten names (``TARGETS``);
- :func:`patcher.transform.patch_source` -- rewrite one module's source (pure function);
- :mod:`patcher.tree` -- files and trees, safe writes; :mod:`patcher.cli` -- ``timewarp patch``;
- :func:`patcher.importhook.install` / ``uninstall`` / ``run_main`` -- the import hook;
  ``python -m patcher.run_script PROG.py`` runs a script through it;
- :func:`patcher.freeze.start_freeze` -- ``--freeze-unpatched`` (freezegun on our clock).

User guide: ``docs/patcher.md``.
"""
