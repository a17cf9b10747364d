"""Starting a program with timewarp's runtime on: the environment ``timewarp run`` execs
it with, and the command line as it will run.

The environment puts ``_boot/`` first on ``PYTHONPATH``: its ``sitecustomize`` runs
:func:`patcher.bootstrap.boot` before the program (runtime on, import hook installed).
Used by ``timewarp run`` and by the broker's launcher, which execs schedulers directly
with it (one interpreter start less than going through ``timewarp run``).

Command lines are taken as people write them: ``env PYTHONPATH=deps python x.py`` keeps
the runtime's entries in front of the user's (``env`` would otherwise replace them, and
the program would silently run on the wall clock), and a nested
``timewarp run [OPTIONS] -- CMD`` is unwrapped into CMD with those options applied.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from timewarp.wire import clockproto

BOOT_DIR = Path(__file__).resolve().parent / "_boot"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
ENV_NO_IMPORT_HOOK = "TIMEWARP_NO_IMPORT_HOOK"
DEFAULT_SEED = 0  # the run's seed when none is given: runs are reproducible by default
_HASH_SEED_LIMIT = 2**32  # PYTHONHASHSEED: 0 .. 4294967295


def process_seed(run_seed: int, name: str) -> int:
    """The seed of the process ``name`` in a run seeded ``run_seed``: 64 bits of SHA-256
    (the same on every machine and Python), different for each name and each seed."""
    digest = hashlib.sha256(f"timewarp-seed\0{run_seed}\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def compose_pythonpath(user: str | None) -> str:
    """The runtime's entries first (its ``sitecustomize`` must win), then the user's, each
    entry once."""
    entries = [str(BOOT_DIR), str(PACKAGE_ROOT)]
    for entry in (user or "").split(os.pathsep):
        if entry and entry not in entries:
            entries.append(entry)
    return os.pathsep.join(entries)


def runtime_environment(
    env: dict[str, str],
    *,
    patch_modules: Sequence[str] = (),
    import_hook: bool = True,
    freeze_unpatched: bool = False,
    seed: int | None = None,
) -> dict[str, str]:
    """``env`` (changed in place and returned) for a program that starts timewarp's
    runtime at start-up (``sitecustomize`` in BOOT_DIR): what ``timewarp run`` execs with.
    The clock service's variables (TIMEWARP_CLOCK, TIMEWARP_NAME, ...) are the caller's.
    ``seed`` (the process's, :func:`process_seed`) fixes its entropy, which the runtime
    draws from it, and its hash seed, which the interpreter takes from the environment
    at start-up (a PYTHONHASHSEED already there is replaced: the run's seed decides)."""
    env["PYTHONPATH"] = compose_pythonpath(env.get("PYTHONPATH"))
    modules = [m for m in env.get(clockproto.ENV_PATCH_MODULES, "").split(",") if m]
    for module in patch_modules:
        if module not in modules:
            modules.append(module)
    env[clockproto.ENV_PATCH_MODULES] = ",".join(modules)
    if not import_hook:
        env[ENV_NO_IMPORT_HOOK] = "1"
    if freeze_unpatched:
        env[clockproto.ENV_FREEZE_UNPATCHED] = "1"
    if seed is not None:
        env[clockproto.ENV_SEED] = str(seed)
        env["PYTHONHASHSEED"] = str(seed % _HASH_SEED_LIMIT)
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
    timewarp is installed in), and so does a console script installed beside it
    (``kopf``) when it is not on PATH; ``python prog.py ...`` becomes
    ``python -m patcher.run_script prog.py ...``, because the interpreter compiles the main
    script itself, past every import hook (``python -m pkg.mod`` goes through them)."""
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        return command
    if command[0] in ("python", "python3"):
        command = [sys.executable, *command[1:]]
    elif os.sep not in command[0] and shutil.which(command[0]) is None:
        # a console script of a package installed beside timewarp (``kopf run ...``) while
        # that environment's bin/ is not on PATH
        beside = Path(sys.executable).parent / command[0]
        if beside.is_file() and os.access(beside, os.X_OK):
            command = [str(beside), *command[1:]]
    if rewrite_script and _is_python(command[0]) and len(command) > 1:
        script = command[1]
        if not script.startswith("-") and script.endswith(".py"):
            command = [command[0], "-m", "patcher.run_script", *command[1:]]
    return command


class LaunchError(ValueError):
    """A command line that cannot be run as given (named in the message)."""


@dataclass
class Launch:
    """A command line taken apart: the program to exec, the environment changes its
    ``env`` prefix asked for, and the options of a nested ``timewarp run``."""

    argv: list[str]
    set_env: dict[str, str] = field(default_factory=dict)
    unset_env: list[str] = field(default_factory=list)
    clear_env: bool = False
    patch_modules: list[str] = field(default_factory=list)
    import_hook: bool = True
    freeze_unpatched: bool = False
    name: str | None = None

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` as the ``env`` prefix would leave it (a new dict)."""
        out = {} if self.clear_env else dict(env)
        for key in self.unset_env:
            out.pop(key, None)
        out.update(self.set_env)
        return out


_ENV_FLAGS_WITH_VALUE = {"-u", "--unset"}


def _take_env_prefix(argv: list[str], launch: Launch) -> list[str]:
    """``env [-i] [-u NAME]... [NAME=VALUE]... CMD...`` -> CMD..., recording the changes.
    Options of GNU env that change how CMD runs in other ways are refused by name."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg in ("-i", "-", "--ignore-environment"):
            launch.clear_env = True
        elif arg in _ENV_FLAGS_WITH_VALUE:
            if i + 1 >= len(argv):
                raise LaunchError(f"`env {arg}` needs a variable name")
            launch.unset_env.append(argv[i + 1])
            i += 1
        elif arg.startswith("--unset="):
            launch.unset_env.append(arg.split("=", 1)[1])
        elif arg.startswith("-"):
            raise LaunchError(
                f"`env {arg}` is not supported in a scheduler command; set variables with "
                "`env NAME=VALUE ... CMD` (or -i, -u NAME)"
            )
        elif "=" in arg:
            break
        else:
            break
        i += 1
    while i < len(argv) and "=" in argv[i] and not argv[i].startswith("="):
        key, _, value = argv[i].partition("=")
        launch.set_env[key] = value
        i += 1
    rest = argv[i:]
    if not rest:
        raise LaunchError("`env` without a command to run")
    return rest


def _is_timewarp_run(argv: list[str]) -> bool:
    if len(argv) >= 2 and os.path.basename(argv[0]) == "timewarp" and argv[1] == "run":
        return True
    return (
        len(argv) >= 4
        and _is_python(argv[0])
        and argv[1:3] == ["-m", "timewarp"]
        and argv[3] == "run"
    )


def _take_timewarp_run(argv: list[str], launch: Launch) -> list[str]:
    """``timewarp run [OPTIONS] -- CMD...`` -> CMD..., its options recorded. Under a broker
    ``timewarp run`` only sets the environment up and execs CMD: the launcher does the
    same directly (a second clock connection from the ``timewarp run`` process itself
    would be a second process of the same name)."""
    args = argv[2:] if os.path.basename(argv[0]) == "timewarp" else argv[4:]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-"):
            break
        key, eq, value = arg.partition("=")
        if key in ("--patch-module", "--name"):
            if not eq:
                if i + 1 >= len(args):
                    raise LaunchError(f"`timewarp run {key}` needs a value")
                value = args[i + 1]
                i += 1
            if key == "--patch-module":
                launch.patch_modules.append(value)
            else:
                launch.name = value
        elif arg == "--no-import-hook":
            launch.import_hook = False
        elif arg == "--freeze-unpatched":
            launch.freeze_unpatched = True
        elif arg in ("-q", "--quiet"):
            pass
        elif key == "--seed":
            raise LaunchError(
                "`timewarp run --seed` under `timewarp simulate`: each process's seed comes "
                "from the run's (`timewarp simulate --seed`); drop it"
            )
        elif key == "--standalone":
            raise LaunchError(
                "`timewarp run --standalone` starts a clock of its own; under `timewarp "
                "simulate` drop --standalone (the broker's clock is used)"
            )
        else:
            raise LaunchError(
                f"`timewarp run {arg}` has no meaning under `timewarp simulate` (it "
                "configures a standalone clock); drop it"
            )
        i += 1
    rest = args[i:]
    if not rest:
        raise LaunchError("`timewarp run` without a program after --")
    return rest


def parse_launch(argv: Sequence[str]) -> Launch:
    """Take ``env`` prefixes and nested ``timewarp run`` wrappers off a command line."""
    launch = Launch(list(argv))
    rest = list(argv)
    while rest:
        if os.path.basename(rest[0]) == "env":
            rest = _take_env_prefix(rest, launch)
        elif _is_timewarp_run(rest):
            rest = _take_timewarp_run(rest, launch)
        else:
            break
    launch.argv = rest
    return launch
