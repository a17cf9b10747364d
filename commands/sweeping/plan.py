"""From points to runs: generated inputs, the ``timewarp simulate`` command, the run's hash.

A run is (point, replicate). Its identity is a SHA-256 over what decides its outcome:
the scheduler commands, the SHA-256 of every source file they run (``sources.py``: the
scheduler's package or script folder, what it imports from the root, ``--patch-module``
packages), the *contents* of the platform and workload files, the mode and its flags, the
extra simulate flags, the replicate index and the seed. Its directory is
``RESULTS/runs/<first 16 hex digits>``, so an edited workload file or scheduler gives new
runs while a moved one does not. Not hashed: timewarp itself and installed libraries.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commands.sweeping.sources import SourceHasher, patch_modules
from commands.sweeping.spec import (
    PLACEHOLDER,
    SEEDED_GENERATORS,
    Entity,
    Point,
    SpecError,
    Sweep,
)

RESULT_FILE = "result.json"
POINT_FILE = "point.json"


@dataclass(frozen=True)
class Run:
    run_id: str
    point: Point
    replicate: int
    seed: int
    directory: Path
    simulate_argv: list[str]  # the arguments after `timewarp simulate`
    identity: dict[str, Any]

    def task(self, sweep: Sweep) -> dict[str, Any]:
        """The picklable description a Dask worker needs (see runner.run_point)."""
        return {
            "run_id": self.run_id,
            "directory": str(self.directory),
            "simulate_argv": self.simulate_argv,
            "cwd": str(sweep.root),
            "timeout": sweep.timeout,
            "record": self.record(),
        }

    def record(self) -> dict[str, Any]:
        """What point.json holds: the factors, replicate, seed and the exact command."""
        return {
            "run_id": self.run_id,
            "factors": self.point.factors,
            "replicate": self.replicate,
            "seed": self.seed,
            "simulate_argv": self.simulate_argv,
            "identity": self.identity,
        }


def _sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _substitute(text: str, seed: int, replicate: int, params: dict[str, Any] | None = None) -> str:
    """Fill ``{seed}``, ``{replicate}`` and ``{param}`` placeholders (other braces stay)."""
    values = {**(params or {}), "seed": seed, "replicate": replicate}
    return PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), text)


def _flags(params: dict[str, Any], skip: set[str]) -> list[str]:
    """``{'timeout-value': 5, 'fixed_delay': True}`` -> ``['--timeout-value', '5', '--fixed-delay']``."""
    argv: list[str] = []
    for key, value in params.items():
        if key in skip or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return argv


class InputMaker:
    """Generates (once) the platforms and workloads a sweep describes by generator settings.

    Files land in ``RESULTS/inputs/`` named by a hash of the settings, so a resumed sweep
    reuses them. Seeded generators (poisson, mixed, script) get the run's seed unless the
    sweep fixes ``seed`` itself. A ``script`` generator runs with the root as its working
    directory; its output's *contents* are what the run's identity hashes.
    """

    def __init__(self, inputs_dir: Path, root: Path) -> None:
        self.inputs_dir = inputs_dir
        self.root = root
        self._memo: dict[str, str] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def path(self, ent: Entity, settings: dict[str, Any], seed: int) -> str:
        if ent.path is not None:
            return ent.path
        gen = settings["generator"]
        params = dict(settings)
        if gen in SEEDED_GENERATORS and "seed" not in params:
            params["seed"] = seed
        key = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # the same settings asked twice at once: generate once
            if key not in self._memo:
                self._memo[key] = self._generate(ent, gen, params, key)
            return self._memo[key]

    def _generate(self, ent: Entity, gen: str, params: dict[str, Any], key: str) -> str:
        suffix = ".xml" if ent.kind == "platform" else ".json"
        out = self.inputs_dir / f"{ent.kind}-{ent.name}-{key}{suffix}"
        if not out.exists():
            self.inputs_dir.mkdir(parents=True, exist_ok=True)
            if gen == "script":  # a program of the user's: `python SCRIPT --flags -o OUT`
                argv = [sys.executable, params["script"]]
            else:
                argv = [sys.executable, "-m", "timewarp", "workload", gen]
            if gen == "from-swf":
                argv.append(params["trace"])
            argv += _flags(params, skip={"generator", "trace", "script"}) + ["-o", str(out)]
            env = dict(os.environ)  # as for the schedulers: the root's packages importable
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(self.root), env.get("PYTHONPATH")])
            )
            proc = subprocess.run(argv, capture_output=True, text=True, cwd=self.root, env=env)
            if proc.returncode != 0:
                what = params["script"] if gen == "script" else f"timewarp workload {gen}"
                raise SpecError(
                    f"{ent.kind}s.{ent.name}: the generator failed "
                    f"({what}): {proc.stderr.strip() or proc.returncode}"
                )
        return str(out)


def _generate_in_parallel(sweep: Sweep, maker: InputMaker) -> None:
    """Generate every input once, a few generator processes at a time (they are independent
    and mostly Python start-up); planning then finds them memoised. The first failure wins."""
    wanted = []
    for point in sweep.points:
        for kind in ("platform", "workload"):
            ent = point.entities[kind]
            if ent.path is None:
                for seed in sweep.seeds:
                    wanted.append((ent, point.settings[kind], seed))
    if not wanted:
        return
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        for future in [pool.submit(maker.path, *job) for job in wanted]:
            future.result()


def plan_runs(sweep: Sweep, results: Path) -> list[Run]:
    """Every (point, replicate) of the sweep, with inputs generated and ids computed.

    ``results`` is made absolute first: generators and runs work from the sweep's root,
    so a path relative to the caller's directory would land under the root instead."""
    results = results.absolute()
    maker = InputMaker(results / "inputs", sweep.root)
    _generate_in_parallel(sweep, maker)
    file_hashes: dict[str, str] = {}
    sources = SourceHasher(sweep.root)

    def content_hash(path: str) -> str:
        if path not in file_hashes:
            file_hashes[path] = _sha256_file(path)
        return file_hashes[path]

    runs: list[Run] = []
    for point in sweep.points:
        mode_params = point.settings["mode"]
        for replicate, seed in enumerate(sweep.seeds):
            commands = [
                _substitute(c, seed, replicate, point.settings["scheduler"])
                for c in point.entities["scheduler"].commands
            ]
            platform = maker.path(point.entities["platform"], point.settings["platform"], seed)
            workload = maker.path(point.entities["workload"], point.settings["workload"], seed)
            mode_flags = _flags(mode_params, skip={"mode"})
            extra = [_substitute(a, seed, replicate) for a in sweep.simulate_args]
            identity = {
                "schedulers": commands,
                "scheduler_sources": sources.hashes(commands, patch_modules([*mode_flags, *extra])),
                "platform_sha256": content_hash(platform),
                "workload_sha256": content_hash(workload),
                "mode": mode_params["mode"],
                "mode_flags": mode_flags,
                "simulate_args": extra,
                "replicate": replicate,
                "seed": seed,
            }
            digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
            run_id = digest[:16]
            directory = results / "runs" / run_id
            argv: list[str] = []
            for cmd in commands:  # {run_dir} is filled after hashing: where is not what
                argv += ["--scheduler", cmd.replace("{run_dir}", str(directory.resolve()))]
            argv += ["-p", platform, "-w", workload, "--mode", mode_params["mode"], *mode_flags]
            argv += [*extra, "--seed", str(seed), "-q", "-o", str(directory)]
            argv += ["--cwd", str(sweep.root)]
            if not sweep.plots:
                argv.append("--no-plots")
            runs.append(Run(run_id, point, replicate, seed, directory, argv, identity))
    return runs


def finished_result(run_dir: Path) -> dict[str, Any] | None:
    """The run's result.json if the run finished (ok or failed), else None."""
    try:
        return json.loads((run_dir / RESULT_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
