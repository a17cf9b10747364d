"""The ``timewarp`` command: one sub-command per tool, each owned by its package.

A sub-command module provides ``add_arguments(parser)`` and ``run(args) -> int``; it is
imported only when chosen, so ``timewarp patch`` never loads zmq and ``timewarp sim``
never loads libcst.
"""

from __future__ import annotations

import difflib
import gc
import importlib
import signal
import sys
import time

STARTED = time.perf_counter()  # the command's start, for "wall time of the whole command"


from commands.parsing import CommandParser  # noqa: E402 - after STARTED, on purpose
from commands.simulating import heap  # noqa: E402
from commands.stopping import StopSignals  # noqa: E402

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("commands.run", "run a program under virtual time (import hook + runtime)"),
    "patch": ("patcher.cli", "rewrite Python sources so their time calls use the virtual clock"),
    "sim": ("simulator.cli", "the embedded Batsim-compatible simulator (batsim's flags)"),
    "workload": ("commands.workload", "import and generate workloads and platforms"),
    "broker": (
        "commands.broker",
        "the broker alone (Batsim decision process + Kubernetes API) for a simulator and "
        "schedulers started by hand",
    ),
    "simulate": ("commands.simulate", "simulator + broker + scheduler(s) in one command"),
    "sweep": ("commands.sweep", "parameter studies and replicates on Dask"),
    "explain": ("commands.explain", "one pod's life in a finished run: bound by whom, where, why"),
    "resume": ("commands.resume", "resume a paused `timewarp simulate` run (see --pause-at)"),
    "compare": ("commands.compare", "runs side by side: a table and a self-contained HTML report"),
    "report": ("commands.report_run", "one run's figures, plots and manifest (table and HTML)"),
}


def build_parser() -> CommandParser:
    from timewarp import __version__

    parser = CommandParser(
        prog="timewarp",
        description="Run unmodified Python schedulers in simulated time.",
    )
    parser.add_argument("--version", action="version", version=f"timewarp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None, *, exiting: bool = False) -> int:
    """Run one sub-command; its exit status. ``exiting``: the process ends with it (the
    stop signals stay noted, not restored, until it has)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in SUBCOMMANDS:
        parser = build_parser()
        if not argv:
            parser.print_help(sys.stderr)
            return 2
        if not argv[0].startswith("-"):
            close = difflib.get_close_matches(argv[0], SUBCOMMANDS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            parser.error(f"unknown command {argv[0]!r}{hint}; commands: {', '.join(SUBCOMMANDS)}")
        parser.parse_args(argv)  # prints usage / version and exits
        return 2
    name, rest = argv[0], argv[1:]
    # First thing, for the command's whole life: the first stop signal unwinds it (its
    # clean-up runs) wherever it is — an import, the input checks, the run, the last
    # lines — never the default action that kills it half-way (commands/stopping.py).
    signals = StopSignals(f"timewarp {name}")
    try:
        with signals:
            try:
                return _run_command(name, rest)
            finally:  # what comes after the command's work is noted, not obeyed
                if exiting:
                    signals.keep_noting()
    except KeyboardInterrupt as exc:  # 128 + the signal (commands.stopping raises with it)
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"timewarp {name}: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
        return 128 + signum


def _run_command(name: str, rest: list[str]) -> int:
    module_name, help_text = SUBCOMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            print(f"timewarp {name}: not available in this build ({exc})", file=sys.stderr)
            return 2
        raise
    import faulthandler

    try:  # `kill -QUIT <pid>` (Ctrl-\\) prints every thread's stack; SIGUSR1 pauses a run
        faulthandler.register(signal.SIGQUIT)
    except (AttributeError, ValueError, OSError):  # no real stderr (embedded, captured)
        pass
    parser = CommandParser(prog=f"timewarp {name}", description=help_text)
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    return int(module.run(args) or 0)


def entry() -> None:
    """The ``timewarp`` command (and ``python -m timewarp``): ``main`` in a process that
    ends with it."""
    heap.OWNED = True  # a simulation may tune this process's cyclic GC (heap.settle)
    code = main(exiting=True)
    # The process is about to exit: a simulation leaves a large heap (the store, the
    # event history) that the interpreter's final collection would walk for nothing
    # (~30 ms, against ~1 s for a whole burst run). Freezing skips that walk; objects
    # are still released by reference count, and every file a command writes is
    # closed by the time it returns.
    gc.freeze()
    raise SystemExit(code)


if __name__ == "__main__":
    entry()
