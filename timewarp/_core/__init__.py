"""The runtime's private core: the per-process scheduler state (``runtime``), the clock
client (``client``), the facade-socket ledger (``netio``) and turning it all on
(``activation``). Patched code never imports these; it imports the drop-ins
(``timewarp.vtime``, ``timewarp.vthreading``, ...), which are the public surface."""
