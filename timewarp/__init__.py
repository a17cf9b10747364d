"""timewarp: run unmodified Python schedulers in simulated time.

The runtime that patched code imports lives in the ``timewarp.v*`` modules
(``vtime``, ``vdatetime``, ``vthreading``, ``vqueue``, ``vsched``, ``vasyncio``);
``timewarp.cli`` is the ``timewarp`` command.
"""

__version__ = "0.1.0"
