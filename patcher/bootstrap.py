"""What ``timewarp run`` does inside the program's process before the program starts:
turn the runtime on, install the import hook, optionally freeze unpatched modules.

Run from ``_boot/sitecustomize.py``, which :mod:`patcher.launch` puts first on the
program's ``PYTHONPATH``. Not in timewarp's own command (``timewarp run`` nested in a
scheduler command line, a wrapper script calling ``timewarp ...``): that process only
prepares the environment and execs the program, which joins the clock itself; joining
from the command too would make two processes of one name."""

from __future__ import annotations

import os
import sys

from timewarp.wire import clockproto

_CLI_MODULES = ("timewarp", "commands.cli", "timewarp.__main__")


def is_timewarp_cli(orig_argv: list[str] | None = None) -> bool:
    """Whether this interpreter runs the ``timewarp`` command (console script or
    ``python -m timewarp``), judged from its command line."""
    argv = list(sys.orig_argv if orig_argv is None else orig_argv)[1:]
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return i + 1 < len(argv) and argv[i + 1] in _CLI_MODULES
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:] in _CLI_MODULES
        if arg in ("-c", "-"):
            return False
        if arg in ("-X", "-W"):
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return _is_console_script(arg)
    return False


def _is_console_script(path: str) -> bool:
    if os.path.basename(path) != "timewarp":
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return b"commands.cli" in head


def boot() -> None:
    if is_timewarp_cli():
        return
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
    if os.environ.get(clockproto.ENV_FREEZE_UNPATCHED) == "1":
        from patcher import freeze
        from timewarp import vtime

        freeze.start_freeze(vtime.time_ns)
