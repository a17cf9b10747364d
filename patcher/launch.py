"""Starting a program with timewarp's runtime on: the environment ``timewarp run`` execs
it with, and the command line as it will run.

The environment puts ``_boot/`` first on ``PYTHONPATH``: its ``sitecustomize`` runs
:func:`patcher.bootstrap.boot` before the program (runtime on, import hook installed).
Used by ``timewarp run`` and by the broker's launcher, which execs schedulers directly
with it (one interpreter start less than going through ``timewarp run``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from timewarp.wire import clockproto

BOOT_DIR = Path(__file__).resolve().parent / "_boot"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def runtime_environment(
    env: dict[str, str],
    *,
    patch_modules: Sequence[str] = (),
    import_hook: bool = True,
    freeze_unpatched: bool = False,
) -> dict[str, str]:
    """``env`` (changed in place and returned) for a program that starts timewarp's
    runtime at start-up (``sitecustomize`` in BOOT_DIR): what ``timewarp run`` execs with.
    The clock service's variables (TIMEWARP_CLOCK, TIMEWARP_NAME, ...) are the caller's."""
    paths = [str(BOOT_DIR), str(PACKAGE_ROOT)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    modules = [m for m in env.get(clockproto.ENV_PATCH_MODULES, "").split(",") if m]
    env[clockproto.ENV_PATCH_MODULES] = ",".join(modules + list(patch_modules))
    if not import_hook:
        env["TIMEWARP_NO_IMPORT_HOOK"] = "1"
    if freeze_unpatched:
        env[clockproto.ENV_FREEZE_UNPATCHED] = "1"
    return env


def _is_python(program: str) -> bool:
    name = os.path.basename(program)
    return (
        program == sys.executable
        or name.startswith("python")
        and not name.endswith((".py", "-config"))
    )


def resolve_command(command: list[str], *, rewrite_script: bool = True) -> list[str]:
    """The command as it will run. A bare ``python`` means this interpreter (the one
    timewarp is installed in); ``python prog.py ...`` becomes
    ``python -m patcher.run_script prog.py ...``, because the interpreter compiles the main
    script itself, past every import hook (``python -m pkg.mod`` goes through them)."""
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        return command
    if command[0] in ("python", "python3"):
        command = [sys.executable, *command[1:]]
    if rewrite_script and _is_python(command[0]) and len(command) > 1:
        script = command[1]
        if not script.startswith("-") and script.endswith(".py"):
            command = [command[0], "-m", "patcher.run_script", *command[1:]]
    return command
