"""What ``timewarp run`` does inside the program's process before the program starts:
turn the runtime on, install the import hook, optionally freeze unpatched modules.

Run from ``_boot/sitecustomize.py``, which :mod:`patcher.launch` puts first on the
program's ``PYTHONPATH``."""

from __future__ import annotations

import os
import sys

from timewarp.wire import clockproto


def boot() -> None:
    from timewarp._core.activation import activate_from_env

    rt = activate_from_env()
    if rt is None:
        return
    modules = [m for m in os.environ.get(clockproto.ENV_PATCH_MODULES, "").split(",") if m]
    if os.environ.get("TIMEWARP_NO_IMPORT_HOOK") != "1":
        try:
            from patcher import importhook
        except ImportError as exc:
            sys.stderr.write(
                f"timewarp run: import hook unavailable ({exc}); "
                "only pre-patched code follows virtual time\n"
            )
        else:
            importhook.install(modules)
    if os.environ.get("TIMEWARP_INCLUSTER_DIR"):
        # load_incluster_config() reads fixed service-account paths: point them at ours.
        from timewarp.wire.incluster import redirect_incluster_config

        redirect_incluster_config()
    if os.environ.get(clockproto.ENV_FREEZE_UNPATCHED) == "1":
        from patcher import freeze
        from timewarp import vtime

        freeze.start_freeze(vtime.time_ns)
