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
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

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


def run_twice(out: Path, run_into: Callable[[Path], int], log: TextIO, prog: str) -> int:
    """Run the simulation into ``OUT/.determinism-check`` and then into ``OUT``, compare.
    A run that fails ends the check with its own exit status."""
    first_dir = out / FIRST_RUN_DIR
    kept = out / KEPT_FIRST_RUN_DIR
    shutil.rmtree(first_dir, ignore_errors=True)
    shutil.rmtree(kept, ignore_errors=True)
    first_dir.mkdir(parents=True)
    print(f"{prog}: determinism check: first run (into {first_dir})", file=log)
    code = run_into(first_dir)
    if code != 0:
        print(f"{prog}: determinism check: the first run failed (exit {code})", file=log)
        return code
    print(f"{prog}: determinism check: second run (into {out})", file=log)
    code = run_into(out)
    if code != 0:
        print(f"{prog}: determinism check: the second run failed (exit {code})", file=log)
        return code
    compared, differences = compare(first_dir, out)
    if not differences:
        shutil.rmtree(first_dir, ignore_errors=True)
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
