"""``timewarp run``: run a program under virtual time.

    timewarp run --standalone -- python prog.py          # no simulator: time jumps
    timewarp run --patch-module apscheduler -- python sched.py   # under a broker

The program's own modules (everything outside the standard library and site-packages)
are rewritten on import, plus the ``--patch-module`` packages; nothing has to be patched
by hand first. Under ``timewarp simulate`` the broker's address comes from the
environment; ``--standalone`` starts a private clock service instead.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from commands.outfiles import write_text_atomically
from commands.report import format_speedup
from commands.report import speedup as _speedup
from commands.stopping import Interrupted, StopSignals, exit_status
from patcher.launch import DEFAULT_SEED, process_seed, resolve_command, runtime_environment
from timewarp.wire import clockproto
from timewarp.wire.stophold import critical

# Set (in NAME.env) by `timewarp broker --expect NAME`: the program's exit code is written
# there, since a process started by hand is not the broker's child (see _run_and_tell).
ENV_EXIT_FILE = "TIMEWARP_EXIT_FILE"
# --standalone: where the clock service listens (default: a Unix socket in a private
# folder); a TCP address runs the clock over loopback instead (not documented for users)
ENV_STANDALONE_ENDPOINT = "TIMEWARP_STANDALONE_ENDPOINT"


def parse_epoch(text: str) -> int:
    """An ISO-8601 date/time (UTC if naive) or Unix seconds -> epoch in ns."""
    try:
        return int(round(float(text) * 1_000_000_000))
    except ValueError:
        pass
    import datetime as _dt  # only for a date given as text

    try:
        value = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--epoch: expected an ISO date/time like 2026-01-01T00:00:00Z or Unix seconds, got {text!r}"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    return int(value.timestamp()) * 1_000_000_000 + value.microsecond * 1000


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def seed_value(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def add_time_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the virtual clock and of the rewriting that ``run`` and ``simulate``
    share (same names, same help, same defaults)."""
    parser.add_argument(
        "--patch-module",
        action="append",
        default=[],
        metavar="PKG",
        help="also rewrite this installed package on import, e.g. apscheduler (repeatable; "
        "globs like 'mylib.*')",
    )
    parser.add_argument(
        "--freeze-unpatched",
        action="store_true",
        help="modules that were not rewritten read virtual wall-clock time too (freezegun)",
    )
    parser.add_argument(
        "--epoch",
        type=parse_epoch,
        default=None,
        metavar="WHEN",
        help="wall-clock date and time at virtual 0: ISO 8601 (2026-01-01T00:00:00Z; UTC if "
        "no zone is given) or Unix seconds (default 2026-01-01T00:00:00Z)",
    )
    parser.add_argument(
        "--stall-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="wall-clock seconds a process may stay busy without the broker seeing progress "
        "before the stall guard reports its threads' stacks (default 10; at least 60 before "
        "a process first waits, for slow start-ups)",
    )
    parser.add_argument(
        "--on-stall",
        choices=("advance", "stop"),
        default="advance",
        help="after a stall report: advance virtual time anyway (the advance is counted as "
        "non-deterministic) or stop the run (default advance)",
    )
    parser.add_argument(
        "--seed",
        type=seed_value,
        default=None,
        metavar="N",
        help="the run's seed: each process's random, hash order, os.urandom, secrets, uuid "
        "and numpy draw from streams derived from it and the process's name (default "
        f"{DEFAULT_SEED}; under a broker, `timewarp run` keeps the broker's unless given)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--standalone",
        action="store_true",
        help="no simulator: start a private clock service; time jumps whenever the program is idle",
    )
    parser.add_argument(
        "--no-import-hook",
        action="store_true",
        help="rewrite nothing on import (the program was patched ahead of time)",
    )
    add_time_arguments(parser)
    parser.add_argument(
        "--name",
        default="main",
        help="process name, which orders simultaneous wake-ups (default main)",
    )
    parser.add_argument(
        "--threads",
        choices=("deterministic", "free"),
        default="deterministic",
        help="standalone only: deterministic (default) runs one thread at a time in a "
        "reproducible order; free lets threads run in parallel and reads the clock by "
        "round trip (not reproducible)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only warnings and errors (here: no summary line at the end)",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="profile the program with cProfile (every thread): DIR/profile-NAME.prof, "
        "written when it exits (or when the broker ends the run)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")


def child_environment(args: argparse.Namespace) -> dict[str, str]:
    seed = args.seed
    if seed is None and args.standalone:
        seed = DEFAULT_SEED
    name = args.name
    if not args.standalone and args.name == "main":
        name = os.environ.get(clockproto.ENV_NAME, name)  # the process joins under it
    return runtime_environment(
        dict(os.environ),
        patch_modules=args.patch_module,
        import_hook=not args.no_import_hook,
        freeze_unpatched=args.freeze_unpatched,
        # under a broker without --seed: the one the launcher gave (in the environment)
        seed=None if seed is None else process_seed(seed, name),
    )


def run(args: argparse.Namespace) -> int:
    command = resolve_command(args.command, rewrite_script=not args.no_import_hook)
    if not command:
        print(
            "timewarp run: give the program to run after --, e.g. "
            "`timewarp run --standalone -- python prog.py`",
            file=sys.stderr,
        )
        return 2
    if shutil.which(command[0]) is None and not os.path.exists(command[0]):
        print(f"timewarp run: program not found: {command[0]!r}", file=sys.stderr)
        return 2
    env = child_environment(args)
    if args.profile:
        try:
            os.makedirs(args.profile, exist_ok=True)
        except OSError as exc:
            print(f"timewarp run: --profile {args.profile}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        env[clockproto.ENV_PROFILE_DIR] = os.path.abspath(args.profile)
    if not args.standalone:
        if clockproto.ENV_ENDPOINT not in os.environ:
            print(
                "timewarp run: no broker to connect to (TIMEWARP_CLOCK is not set); use "
                "--standalone, or run it under `timewarp simulate`",
                file=sys.stderr,
            )
            return 2
        if args.name != "main" or clockproto.ENV_NAME not in env:
            env[clockproto.ENV_NAME] = args.name
        exit_file = env.pop(ENV_EXIT_FILE, None)
        if exit_file:  # started by hand under `timewarp broker`: it must learn the exit code
            return _run_and_tell(command, env, Path(exit_file))
        os.execvpe(command[0], command, env)

    import tempfile

    from broker.clock.service import DEFAULT_EPOCH_NS, ClockService
    from broker.drivers.standalone import run_standalone

    # the first SIGINT/SIGTERM/SIGHUP is passed on to the program (run_standalone), later
    # ones only noted: the clock service closes and its folder goes whatever comes
    sockdir = clock = None
    with StopSignals("timewarp run") as signals:
        try:
            with critical:  # made and recorded together: the finally removes it
                # a Unix socket: quicker than loopback TCP for the one-machine standalone case
                sockdir = tempfile.mkdtemp(prefix="timewarp-")
            endpoint = os.environ.get(ENV_STANDALONE_ENDPOINT, f"ipc://{sockdir}/clock")
            try:
                with critical:  # (the same: the finally closes it)
                    clock = ClockService(
                        endpoint=endpoint,
                        epoch_ns=args.epoch if args.epoch is not None else DEFAULT_EPOCH_NS,
                        mode="deterministic" if args.threads == "deterministic" else "free",
                        stall_timeout=args.stall_timeout,
                        on_stall=args.on_stall,
                    )
            except (OSError, ValueError) as exc:
                if ENV_STANDALONE_ENDPOINT not in os.environ:
                    raise  # our own private socket: not the user's doing
                # the user's address: taken (another program listens there) or malformed
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                print(
                    f"timewarp run: {ENV_STANDALONE_ENDPOINT}={endpoint}: {why}; give a free "
                    "address (tcp://127.0.0.1:0 picks one) or unset it (a private socket)",
                    file=sys.stderr,
                )
                return 2
            result = run_standalone(command, env=env, clock=clock, name=args.name)
        except Interrupted as exc:
            signals.shield()
            print(f"timewarp run: interrupted by {exc}", file=sys.stderr)
            return exit_status(exc.signum)
        finally:
            # (no call before this try: one met as the clean-up begins must not skip it)
            try:
                signals.shield()  # the program has ended: its exit status is the command's
            except Interrupted:
                pass  # noted; the program's status stands (run_standalone passed it on)
            if clock is not None:
                clock.close()
            if sockdir is not None:
                shutil.rmtree(sockdir, ignore_errors=True)
    if not args.quiet:
        speedup = format_speedup(_speedup(result.virtual_ns / 1e9, result.wall_s)) or "no time"
        print(
            f"timewarp: simulated {_fmt_duration(result.virtual_ns)} in {result.wall_s:.3f} s of "
            f"wall time ({speedup}); {result.fires} wake-ups, {result.advances} time "
            f"advances, {result.nondeterministic_advances} non-deterministic advances; "
            f"exit code {result.returncode}",
            file=sys.stderr,
        )
    if result.returncode < 0:
        return 128 - result.returncode
    return result.returncode


def _run_and_tell(command: list[str], env: dict[str, str], exit_file: Path) -> int:
    """Run ``command`` as a child (not exec'd: the broker is not its parent and cannot
    read its exit code otherwise) and write its exit code to ``exit_file`` for the broker
    — exit 0 ends only that process, any other fails the run, as `timewarp simulate`
    judges the schedulers it launches. The exit status is the program's (128 + N for a
    signal N). Ctrl-C reaches the program from the terminal; SIGTERM and SIGHUP sent to
    this process are passed on."""
    child = subprocess.Popen(command, env=env)

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGHUP)}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    try:
        write_text_atomically(exit_file, f"{code}\n")
    except OSError as exc:  # the broker's folder is gone: it no longer waits for this
        print(f"timewarp run: cannot tell the broker the exit code: {exc}", file=sys.stderr)
    return exit_status(-code) if code < 0 else code


def _fmt_duration(ns: int) -> str:
    total = ns / 1e9
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{int(hours):02d}:{int(minutes):02d}:{seconds:06.3f}"
    return f"{int(days)}d {text}" if days else text
