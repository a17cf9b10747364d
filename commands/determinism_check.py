"""``timewarp simulate --check-determinism``: run the same simulation twice and diff the
bytes of everything it wrote, naming the first line that differs.

madsim runs each test twice with the same seed for the same reason: the promise "same
inputs, same bytes" is only worth what checks it. Compared: every file of the output
folder (the Batsim CSVs, the services' CSV, the plots, every process's log, the
simulator's log) and the manifest without its run-cost fields (wall times and the
speed-up measure the machine, not the simulation). Not compared: the kubeconfigs (each
run serves on a port chosen free at run time, with a fresh token) — they are how to
reach a run, not what it produced.

The first run writes into ``OUT/.determinism-check/`` and the second into ``OUT``; the
first run's folder is removed when both agree and kept, as
``OUT/determinism-check-first-run/``, when they do not, for ``diff -r``.

``.determinism-check`` is scratch and never outlives the command that made it: whatever
ends the check — agreement, a difference, a failed run, a stop signal at any moment, an
exception — it is removed or renamed to the named folder above (a run that failed is
kept there too, its manifest saying why). Only a kill that runs no clean-up (SIGKILL, a
power cut) can leave it; the fixed name says what it is, and the next
``timewarp simulate`` into ``OUT``, with the check or without, removes it first
(:func:`remove_leftover`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from timewarp.wire.stophold import critical

FIRST_RUN_DIR = ".determinism-check"
KEPT_FIRST_RUN_DIR = "determinism-check-first-run"
# exit status of a run whose two passes differ (1 is a failed run, 2 refused input)
DIFFERENT_EXIT = 3
# the manifest's figures that measure the machine, not the simulation: by name, and any
# wall time, CPU time or memory size by suffix
# (and where the run was: its folder, the kubectl line naming its observer kubeconfig)
RUN_COST_KEYS = frozenset({"speedup", "plots_s", "outputs_dir", "kubectl", "pauses"})
RUN_COST_SUFFIXES = ("wall_s", "cpu_s", "cpu_share", "_rss_bytes", "_rss_mib")
NOT_COMPARED_SUFFIXES = (".kubeconfig",)


@dataclass(frozen=True)
class Difference:
    """Where two runs first part: ``file`` (relative to the output folder), the 1-based
    ``line`` (0 for a binary file or a file only one run wrote) and both sides."""

    file: str
    line: int
    first: str
    second: str

    def __str__(self) -> str:
        if self.line == 0:
            return f"{self.file}: {self.first} / {self.second}"
        return (
            f"{self.file}, line {self.line}:\n  first run:  {self.first}\n"
            f"  second run: {self.second}"
        )


def _without_run_cost(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_run_cost(v)
            for k, v in value.items()
            if k not in RUN_COST_KEYS and not k.endswith(RUN_COST_SUFFIXES)
        }
    if isinstance(value, list):
        return [_without_run_cost(v) for v in value]
    return value


def _comparable_bytes(path: Path, first_dir: Path, second_dir: Path) -> bytes:
    data = path.read_bytes()
    if path.name != "manifest.json":
        return data
    try:
        manifest = json.loads(data)
    except ValueError:
        return data
    manifest = _without_run_cost(manifest)
    manifest.pop("arguments", None)  # names the output folder, which differs by design
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    return text.replace(str(first_dir), "OUT").replace(str(second_dir), "OUT").encode()


def _files(folder: Path, skip: set[str]) -> dict[str, Path]:
    found = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0] in skip or not path.is_file():
            continue
        if path.name.endswith(NOT_COMPARED_SUFFIXES):
            continue
        found[str(rel)] = path
    return found


def _first_line_difference(name: str, a: bytes, b: bytes) -> Difference:
    try:
        lines_a = a.decode().splitlines()
        lines_b = b.decode().splitlines()
    except UnicodeDecodeError:
        return Difference(name, 0, f"{len(a)} bytes", f"{len(b)} bytes (binary, differ)")
    for number, (x, y) in enumerate(zip(lines_a, lines_b, strict=False), start=1):
        if x != y:
            return Difference(name, number, x, y)
    number = min(len(lines_a), len(lines_b)) + 1
    more_a = lines_a[number - 1] if len(lines_a) >= number else "(end of file)"
    more_b = lines_b[number - 1] if len(lines_b) >= number else "(end of file)"
    return Difference(name, number, more_a, more_b)


def compare(first_dir: Path, second_dir: Path) -> tuple[int, list[Difference]]:
    """(files compared, differences in file-name order) between two output folders."""
    skip = {FIRST_RUN_DIR, KEPT_FIRST_RUN_DIR}
    first = _files(first_dir, skip)
    second = _files(second_dir, skip)
    differences = []
    for name in sorted(set(first) | set(second)):
        if name not in first or name not in second:
            only = "first" if name in first else "second"
            differences.append(Difference(name, 0, f"written by the {only} run only", ""))
            continue
        a = _comparable_bytes(first[name], first_dir, second_dir)
        b = _comparable_bytes(second[name], first_dir, second_dir)
        if a != b:
            differences.append(_first_line_difference(name, a, b))
    return len(set(first) & set(second)), differences


def remove_leftover(out: Path, log: TextIO, prog: str) -> None:
    """Remove ``OUT/.determinism-check`` left by a check that was killed without its
    clean-up (a scratch folder, never a result), saying so."""
    scratch = out / FIRST_RUN_DIR
    if scratch.is_dir():
        shutil.rmtree(scratch, ignore_errors=True)
        print(
            f"{prog}: removed {scratch}, the scratch folder of an earlier "
            "--check-determinism that was killed before its clean-up",
            file=log,
        )


def run_twice(out: Path, run_into: Callable[[Path], int], log: TextIO, prog: str) -> int:
    """Run the simulation into ``OUT/.determinism-check`` and then into ``OUT``, compare.
    A run that fails ends the check with its own exit status. The scratch folder is gone
    when this returns or raises: removed, or renamed to ``OUT/determinism-check-first-run``
    when there is something to look at (a difference, a failed run)."""
    first_dir = out / FIRST_RUN_DIR
    kept = out / KEPT_FIRST_RUN_DIR
    remove_leftover(out, log, prog)
    shutil.rmtree(kept, ignore_errors=True)
    try:
        first_dir.mkdir(parents=True)
        return _check(out, first_dir, kept, run_into, log, prog)
    finally:
        # a stop signal (raised between the runs or as the second begins), an exception,
        # a signal-ended run: nothing half-made stays in the user's folder. (Stop signals
        # that come now are noted, not raised: the CLI's handler is shielded after the
        # first one; a first one that comes now is held till the folder is gone.)
        with critical:
            shutil.rmtree(first_dir, ignore_errors=True)


def _check(
    out: Path, first_dir: Path, kept: Path, run_into: Callable[[Path], int], log: TextIO, prog: str
) -> int:
    print(f"{prog}: determinism check: first run (into {first_dir})", file=log)
    code = run_into(first_dir)
    if code != 0:
        print(
            f"{prog}: determinism check: the first run failed (exit {code})"
            + _kept_if_failed(code, first_dir, kept),
            file=log,
        )
        return code
    print(f"{prog}: determinism check: second run (into {out})", file=log)
    code = run_into(out)
    if code != 0:
        print(
            f"{prog}: determinism check: the second run failed (exit {code})"
            + _kept_if_failed(code, first_dir, kept, "the first run, which succeeded,"),
            file=log,
        )
        return code
    compared, differences = compare(first_dir, out)
    if not differences:
        print(
            f"{prog}: determinism check: the two runs wrote the same bytes "
            f"({compared} files compared; kubeconfigs and the manifest's wall times left out)",
            file=log,
        )
        return 0
    first_dir.rename(kept)
    print(
        f"{prog}: determinism check FAILED: {len(differences)} of "
        f"{len(set(_files(kept, set())) | set(_files(out, {KEPT_FIRST_RUN_DIR})))} files "
        f"differ; the first run is kept in {kept}\n"
        f"first difference: {differences[0]}",
        file=log,
    )
    for difference in differences[1:]:
        print(f"  also differs: {difference.file}", file=log)
    return DIFFERENT_EXIT


def _kept_if_failed(code: int, first_dir: Path, kept: Path, what: str = "its outputs") -> str:
    """A run that failed by itself: the first run's folder is kept under the visible
    name (for its manifest and logs); one stopped by a signal (128 + N) is not (the
    caller removes it: a user who stopped the check asked for no more of it)."""
    if code >= 128:
        return ""
    first_dir.rename(kept)
    return f"; {what} kept in {kept}"
