"""timewarp: run unmodified Python schedulers in simulated time.

This package is the runtime, the lowest layer: what a scheduler process imports.
Patched code imports the drop-ins ``timewarp.vtime``, ``vdatetime``, ``vthreading``,
``vqueue``, ``vsched`` and ``vasyncio``; their machinery is private (``timewarp._core``)
and what the runtime shares with the broker lives in ``timewarp.wire``. The package
imports nothing of ``patcher``, ``simulator``, ``broker`` or the commands (``commands``,
the ``timewarp`` command), which sit above it.
"""

__version__ = "0.1.0"
