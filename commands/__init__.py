"""The ``timewarp`` commands, the top layer: ``cli`` (the dispatcher), ``simulate``,
``run``, ``sweep`` (with ``sweeping``) and ``report``. They wire the middle layer
(``simulator``, ``patcher``, ``broker``) and the runtime (``timewarp``); nothing below
imports them."""
