"""``timewarp patch``: rewrite a scheduler's sources so their time calls use the runtime.

    timewarp patch SRC [-o OUT | --in-place] [--check] [--diff] [--exclude GLOB ...]
    timewarp patch --package NAME [-o OUT] [--check] [--diff]

Without ``-o`` or ``--in-place`` nothing is written (a dry run that prints the report).
The report (stderr) lists files scanned, changed, unchanged and skipped (with the reason),
and the number of rewrites of each kind; ``--diff`` prints a unified diff on stdout.

Exit status: 0 done; 1 when ``--check`` finds something to change, or when a file does not
parse (it is reported and left/copied untouched; ``--keep-going`` makes that exit 0);
2 for usage errors (missing SRC, conflicting options, unsafe output directory); 128 + the
signal when stopped (130 for Ctrl-C, 143 for SIGTERM), after removing what it half-made.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import os
import signal
import sys
from pathlib import Path

from patcher.targets import TARGETS
from patcher.tree import (
    FileOutcome,
    Report,
    TreeError,
    atomic_write,
    decode,
    mirror_tree,
    patch_in_place,
    process_single,
    process_tree,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", nargs="?", metavar="SRC", help="a Python file or a source tree")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="write a patched mirror of SRC here (non-Python files copied unchanged);"
        " for a single file, the output file, or a directory if it exists or ends in /",
    )
    where.add_argument(
        "--in-place", action="store_true", help="rewrite SRC's files in place (atomically)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if anything would change (for CI)",
    )
    parser.add_argument("--diff", action="store_true", help="print a unified diff on stdout")
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="leave matching paths (relative to SRC, or a file/directory name) untouched;"
        " repeatable",
    )
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="exit 0 even if some files do not parse (they are still reported and copied)",
    )
    parser.add_argument(
        "--package",
        metavar="NAME",
        help="patch the installed top-level package NAME (found without importing it);"
        " with -o OUT, the copy is written to OUT/NAME",
    )


def _usage(message: str) -> int:
    print(f"timewarp patch: {message}", file=sys.stderr)
    return 2


def _unwritable(directory: Path) -> str | None:
    """Why files cannot be made in ``directory`` (made if missing), or None."""
    import tempfile

    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def _locate_package(name: str) -> Path:
    if not name.isidentifier():
        raise TreeError(f"--package takes a top-level package name, got {name!r}")
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:
        raise TreeError(f"cannot locate package {name!r}: {exc}") from None
    if spec is None:
        raise TreeError(f"no installed package or module named {name!r}")
    locations = list(spec.submodule_search_locations or [])
    if len(locations) > 1:
        raise TreeError(f"{name!r} is a namespace package spread over {locations}; patch each")
    if locations:
        return Path(locations[0])
    if spec.origin and spec.origin.endswith(".py"):
        return Path(spec.origin)
    raise TreeError(f"{name!r} is not pure Python source (origin: {spec.origin})")


def run(args: argparse.Namespace) -> int:
    if args.package and args.src:
        return _usage("give either SRC or --package, not both")
    if args.package and args.in_place:
        return _usage("--in-place cannot be used with --package (it would edit site-packages)")
    if args.check and (args.output or args.in_place):
        return _usage("--check changes nothing; it cannot be combined with -o or --in-place")
    output = Path(args.output) if args.output else None
    output_is_dir = bool(args.output) and args.output.endswith(("/", os.sep))
    if output is not None:
        refused = _unwritable(output if output.is_dir() else output.parent)
        if refused:
            return _usage(f"-o {output}: cannot write there ({refused})")
    try:
        if args.package:
            src = _locate_package(args.package)
            out = output / src.name if output else None
        elif args.src:
            src = Path(args.src)
            out = output
            if not src.exists():
                return _usage(f"SRC {src} does not exist")
        else:
            return _usage("give SRC (a file or directory) or --package NAME")
        diff_out = _DiffPrinter(enabled=args.diff)
        if args.in_place:
            report = patch_in_place(src, args.exclude, diff_out)
        elif out is not None and src.is_dir():
            report = mirror_tree(src, out, args.exclude, diff_out)
        elif out is not None:
            target = out / src.name if output_is_dir or out.is_dir() else out
            report = _patch_file_to(src, target, diff_out)
        elif src.is_dir():
            report = process_tree(src, args.exclude, diff_out)
        else:
            report = process_single(src, diff_out)
    except TreeError as exc:
        return _usage(str(exc))
    except BrokenPipeError:  # `--diff | head`: stop quietly, as other CLI tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as exc:
        print(f"timewarp patch: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (commands/cli.py installs
        # commands/stopping.py for every command: they unwind as Ctrl-C does)
        signum = getattr(exc, "signum", signal.SIGINT)
        print(f"timewarp patch: stopped by {signal.Signals(signum).name}: {_left(args, out)}",
              file=sys.stderr)  # fmt: skip
        return 128 + signum
    print_report(report, src, out, in_place=args.in_place)
    if args.in_place and src.is_symlink() and not src.is_dir():
        print(
            f"  {src} is a symbolic link: rewrote {src.resolve()}, kept the link", file=sys.stderr
        )
    if report.parse_failures and not args.keep_going:
        return 1
    if args.check and report.count("changed"):
        return 1
    return 0


def _left(args: argparse.Namespace, out: Path | None) -> str:
    """What an interrupted run leaves: every write is whole or undone."""
    if args.in_place:
        return "the files rewritten so far stay rewritten (each whole), the others untouched"
    if out is not None:
        return f"{out} left as it was (the partial copy removed)"
    return "nothing was written"


def _patch_file_to(src: Path, target: Path, sink: _DiffPrinter) -> Report:
    if target.resolve() == src.resolve():
        raise TreeError(f"-o {target} is SRC itself; use --in-place to rewrite it")

    def write(outcome: FileOutcome, original: bytes, output: bytes) -> None:
        atomic_write(target, output, mode_from=src)
        sink(outcome, original, output)

    return process_single(src, write)


class _DiffPrinter:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, outcome: FileOutcome, original: bytes, output: bytes) -> None:
        if not self.enabled or outcome.status != "changed":
            return
        lines = difflib.unified_diff(
            decode(original).splitlines(keepends=True),
            decode(output).splitlines(keepends=True),
            fromfile=f"a/{outcome.rel}",
            tofile=f"b/{outcome.rel}",
        )
        sys.stdout.writelines(line if line.endswith("\n") else line + "\n" for line in lines)


def print_report(report: Report, src: Path, out: Path | None, *, in_place: bool) -> None:
    """The short summary every run prints on stderr."""
    err = sys.stderr
    scanned = len(report.files)
    action = "rewritten in place" if in_place else (f"written to {out}" if out else "dry run")
    print(
        f"timewarp patch {src}: {scanned} Python file(s) scanned, {report.count('changed')}"
        f" changed, {report.count('unchanged')} unchanged, {report.count('skipped')} skipped"
        f" ({action})",
        file=err,
    )
    if out is not None and report.copied:
        print(f"  {report.copied} other file(s) copied unchanged", file=err)
    for outcome in report.files:
        if outcome.status == "skipped":
            print(f"  skipped {outcome.rel}: {outcome.reason}", file=err)
    for line in report.special:
        print(f"  skipped {line}", file=err)
    rewrites = report.rewrites
    if rewrites:
        print("  rewrites:", file=err)
        for name, count in sorted(rewrites.items()):
            print(f"    {count:6d}  {name} -> {TARGETS[name].runtime}", file=err)
    for outcome in report.files:
        if outcome.result is not None:
            for note in outcome.result.notes:
                print(f"  note {outcome.rel} {note}", file=err)
