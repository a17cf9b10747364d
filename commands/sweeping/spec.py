"""The sweep file: what to run, validated, and expanded into points and runs.

A sweep file (YAML or TOML) names its inputs once and says how to combine them::

    replicates: 3            # runs per point
    base_seed: 1             # replicate r runs with seed base_seed + r
    # seeds: [7, 11, 13]     # or the seeds themselves (an axis: one run per seed)
    schedulers:              # name -> command line (or a list: several schedulers at once)
      tiny: python tests/programs/tiny_scheduler.py --scheduler-name default-scheduler
      kse:                   # or a mapping: {placeholders} in the command take its parameters
        command: python -m sample_schedulers.kse_rebalancer --interval {interval} --seed {seed}
        interval: [30, 60]
    platforms:
      c16: examples/inputs/cluster16.xml          # a file, or {generator: platform, ...}
    workloads:
      burst8: {generator: burst, count: 8, delay: [30, 60]}   # a list is a factor
      trace: examples/inputs/burst_40_delay170.json
    modes:                   # name -> `timewarp simulate --mode` and its flags
      deterministic: {}
      lockstep: {timeout-value: [10, 50, 100]}
    grid: {scheduler: [tiny], workload: [burst8]}   # full factorial; default: every name
    rows: [{scheduler: tiny, workload: trace, mode: deterministic}]   # explicit points

Invariants: every point is a full assignment of scheduler, platform, workload and mode
plus the value of each list-valued parameter of the chosen workload/platform/mode; a
parameter name is one factor (one column) across the whole sweep. Relative paths are
relative to ``root`` (default: the sweep file's directory), which is also the working
directory of the schedulers. Errors name the file and the field (``workloads.burst8.count``).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ENTITY_KINDS = ("scheduler", "platform", "workload", "mode")
RESERVED = {*ENTITY_KINDS, "replicate", "seed", "run_id", "status", "error"}
TIME_MODES = ("deterministic", "lockstep", "realtime")
WORKLOAD_GENERATORS = (
    "burst",
    "spaced",
    "poisson",
    "mixed",
    "service",
    "batch",
    "from-swf",
    "script",
)
# seeded generators get the run's seed (``--seed``) unless the sweep file fixes ``seed``;
# ``script`` is any program taking ``--flag value ... --seed S -o OUT`` (e.g. experiments/
# kse_workload.py), for inputs the built-in tools cannot describe
SEEDED_GENERATORS = ("poisson", "mixed", "service", "batch", "script")
# placeholders every scheduler command may use: the seed, the replicate index, and the run's
# own directory (for a scheduler's extra outputs; not part of the run's identity)
BUILTIN_PLACEHOLDERS = ("seed", "replicate", "run_dir")
# `timewarp simulate` flags the sweep sets itself; a sweep file may not pass them
SWEEP_OWNED_FLAGS = {
    "--scheduler",
    "-p",
    "--platform",
    "-w",
    "--workload",
    "-o",
    "--output",
    "--mode",
    "--cwd",
    "-q",
    "--quiet",
    "--seed",  # each run's seed (base_seed + replicate, or seeds)
}
TOP_LEVEL = {
    "name",
    "description",
    "root",
    "replicates",
    "base_seed",
    "seeds",
    "timeout",
    "simulate_args",
    "plots",
    "schedulers",
    "platforms",
    "workloads",
    "modes",
    "grid",
    "rows",
}
# At most this many runs (points × replicates) per sweep: planning holds every run in
# memory (~3 KB each) and takes ~0.3 ms per run, so a typo of a few zeros (replicates:
# 1000000000, a 1000×1000 grid) is refused before anything is built (docs/sweep.md).
MAX_RUNS = 100_000
MAX_SPEC_BYTES = 4 << 20  # a sweep file names its inputs: a few KiB in practice
Scalar = str | int | float | bool
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")


class SpecError(ValueError):
    """A sweep file is malformed; the message names the file and the field."""


def did_you_mean(word: Any, known: Any) -> str:
    """`` (did you mean 'x'?)`` for a mistyped name close to one of ``known``, else ''."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def generator_flags(generator: str) -> set[str]:
    """The parameter names (``mean_delay``/``mean-delay`` style, as flags) ``timewarp
    workload <generator>`` takes, from its own parser."""
    import argparse

    from simulator.workload_cli import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    tool = sub.choices[generator]
    return {
        opt[2:]
        for action in tool._actions
        for opt in action.option_strings
        if opt.startswith("--") and opt not in ("--help", "--output")
    }


@dataclass(frozen=True)
class Entity:
    """A named scheduler, platform, workload or mode; ``params`` are its settings.

    For a file input ``path`` is set and ``params`` is empty; for a generated input
    ``params['generator']`` names the ``timewarp workload`` tool. For a mode ``params``
    are ``timewarp simulate`` flags (``--name value``). List values are factors.
    """

    kind: str
    name: str
    commands: tuple[str, ...] = ()
    path: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def factor_names(self) -> list[str]:
        return [k for k, v in self.params.items() if isinstance(v, list)]

    def expand(self) -> list[dict[str, Scalar]]:
        """One settings dict per combination of this entity's list-valued parameters."""
        names = self.factor_names()
        out = []
        for combo in itertools.product(*(self.params[n] for n in names)):
            settings = dict(self.params)
            settings.update(zip(names, combo, strict=True))
            out.append(settings)
        return out


@dataclass(frozen=True)
class Point:
    """One cell of the design: the chosen entities and the factor levels."""

    entities: dict[str, Entity]
    settings: dict[str, dict[str, Scalar]]  # kind -> resolved params of that entity
    factors: dict[str, Scalar]  # column -> level (entity names and list-valued params)


@dataclass
class Sweep:
    source: Path
    name: str
    root: Path
    replicates: int
    base_seed: int
    seeds: list[int]  # replicate r runs with seeds[r]: `timewarp simulate --seed`, generators
    timeout: float
    simulate_args: list[str]
    plots: bool
    entities: dict[str, dict[str, Entity]]
    points: list[Point]
    param_factors: list[str]  # every list-valued parameter name, in first-seen order

    @property
    def factor_columns(self) -> list[str]:
        return [*ENTITY_KINDS, *self.param_factors]


# --------------------------------------------------------------------------- loading
def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file; raise SpecError naming the field on bad input."""
    path = Path(path)
    kind = "TOML" if path.suffix.lower() == ".toml" else "YAML"
    try:
        if not path.is_file():  # a FIFO would hang the read, /dev/zero never end
            raise SpecError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise SpecError(f"{path}: larger than the limit of {MAX_SPEC_BYTES:,} bytes")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not a {kind} text file (not UTF-8 at byte {exc.start})") from None
    try:
        data = tomllib.loads(text) if kind == "TOML" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise SpecError(f"{path}: not valid {kind}: {exc}") from None
    except RecursionError:  # the parsers recurse per level of nesting
        raise SpecError(f"{path}: not valid {kind}: nested too deeply") from None
    return parse_sweep(data, path)


def parse_sweep(data: Any, source: Path) -> Sweep:
    v = _Validator(source)
    if not isinstance(data, dict):
        v.fail("", f"expected a mapping at top level, got {_kind(data)}")
    unknown = sorted(set(data) - TOP_LEVEL)
    if unknown:
        v.fail(
            unknown[0],
            f"unknown field{did_you_mean(unknown[0], TOP_LEVEL)} "
            f"(known: {', '.join(sorted(TOP_LEVEL))})",
        )
    root_field = data.get("root", ".")
    if not isinstance(root_field, str):
        v.fail("root", f"expected a directory path, got {_kind(root_field)}")
    root = (source.parent / root_field).resolve()
    if not root.is_dir():
        v.fail("root", f"not a directory: {root}")
    replicates = v.integer(data, "replicates", default=1, minimum=1)
    if replicates > MAX_RUNS:
        v.fail("replicates", f"{replicates:,} is over the limit of {MAX_RUNS:,} runs per sweep")
    base_seed = v.integer(data, "base_seed", default=0, minimum=None)
    seeds = v.seeds(data)
    if seeds is None:
        seeds = [base_seed + r for r in range(replicates)]
    else:
        replicates, base_seed = len(seeds), seeds[0]
    timeout = v.number(data, "timeout", default=1800.0)
    plots = data.get("plots", False)
    if not isinstance(plots, bool):
        v.fail("plots", f"expected true or false, got {plots!r}")
    simulate_args = data.get("simulate_args", [])
    if not isinstance(simulate_args, list) or not all(
        isinstance(a, str | int | float) for a in simulate_args
    ):
        v.fail("simulate_args", "expected a list of strings (extra `timewarp simulate` flags)")
    for i, arg in enumerate(simulate_args):
        flag = str(arg).split("=", 1)[0]
        if flag in SWEEP_OWNED_FLAGS:
            v.fail(f"simulate_args[{i}]", f"{flag} is chosen by the sweep for each run")
    name = data.get("name", source.stem)
    if not isinstance(name, str):
        v.fail("name", f"expected a string, got {_kind(name)}")

    entities = {
        "scheduler": v.schedulers(data),
        "platform": v.files_or_generators(data, "platforms", root),
        "workload": v.files_or_generators(data, "workloads", root),
        "mode": v.modes(data),
    }
    owner: dict[str, str] = {}
    param_factors: list[str] = []
    for kind in ENTITY_KINDS:
        for ent in entities[kind].values():
            for pname in ent.factor_names():
                where = f"{kind}s.{ent.name}.{pname}"
                if pname in RESERVED:
                    v.fail(where, f"{pname!r} is reserved and cannot be a factor")
                previous = owner.setdefault(pname, kind)
                if previous != kind:
                    v.fail(where, f"factor {pname!r} is also a {previous} parameter; rename one")
                if pname not in param_factors:
                    param_factors.append(pname)

    points = v.points(data, entities, replicates)
    if not points:
        v.fail("grid", "the sweep has no points")
    return Sweep(
        source=source,
        name=name,
        root=root,
        replicates=replicates,
        base_seed=base_seed,
        seeds=seeds,
        timeout=timeout,
        simulate_args=[str(a) for a in simulate_args],
        plots=plots,
        entities=entities,
        points=points,
        param_factors=param_factors,
    )


def _kind(value: Any) -> str:
    return {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "nothing",
    }.get(type(value), type(value).__name__)


def _count(entity: Entity) -> int:
    """How many settings an entity expands into (the product of its levels)."""
    return math.prod(len(entity.params[n]) for n in entity.factor_names())


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


class _Validator:
    def __init__(self, source: Path) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> None:
        prefix = f"{self.source}: {where}: " if where else f"{self.source}: "
        raise SpecError(prefix + message)

    def integer(self, data: dict, key: str, default: int, minimum: int | None) -> int:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            self.fail(key, f"expected an integer >= {minimum}, got {value}")
        return value

    def seeds(self, data: dict) -> list[int] | None:
        """``seeds``: distinct integers, instead of ``replicates`` and ``base_seed``;
        None when the file does not give them."""
        if "seeds" not in data:
            return None
        for other in ("replicates", "base_seed"):
            if other in data:
                self.fail("seeds", f"give either seeds or {other}, not both")
        seeds = data["seeds"]
        if not isinstance(seeds, list) or not seeds:
            self.fail("seeds", f"expected a non-empty list of integers, got {_kind(seeds)}")
        for i, seed in enumerate(seeds):
            if isinstance(seed, bool) or not isinstance(seed, int):
                self.fail(f"seeds[{i}]", f"expected an integer, got {seed!r}")
            if seed in seeds[:i]:
                self.fail(f"seeds[{i}]", f"{seed} is already in the list")
        return seeds

    def number(self, data: dict, key: str, default: float) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            self.fail(key, f"expected a positive number of seconds, got {value!r}")
        return float(value)

    def table(self, data: dict, key: str) -> dict:
        table = data.get(key)
        if table is None:
            self.fail(key, "missing (name at least one)")
        if not isinstance(table, dict) or not table:
            self.fail(
                key, f"expected a non-empty mapping of name -> definition, got {_kind(table)}"
            )
        for name in table:
            if not isinstance(name, str) or not name:
                self.fail(key, f"names must be non-empty strings, got {name!r}")
        return table

    def params(self, where: str, params: dict, reserved: set[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for pname, value in params.items():
            if pname in reserved:
                out[pname] = value
                continue
            if not isinstance(pname, str) or not pname.replace("-", "_").isidentifier():
                self.fail(where, f"parameter name {pname!r} is not a flag-like name")
            if isinstance(value, list):
                if not value:
                    self.fail(f"{where}.{pname}", "an empty list of levels")
                if not all(_is_scalar(x) for x in value):
                    self.fail(f"{where}.{pname}", "levels must be strings or numbers")
                if len(set(map(json.dumps, value))) != len(value):
                    self.fail(f"{where}.{pname}", f"repeated level in {value}")
            elif not _is_scalar(value):
                self.fail(f"{where}.{pname}", f"expected a value or a list, got {_kind(value)}")
            out[pname] = value
        return out

    def schedulers(self, data: dict) -> dict[str, Entity]:
        out = {}
        for name, value in self.table(data, "schedulers").items():
            where = f"schedulers.{name}"
            params: dict[str, Any] = {}
            if isinstance(value, dict):
                if "command" not in value:
                    self.fail(f"{where}.command", "missing (the scheduler's command line)")
                params = self.params(where, value, {"command"})
                value = params.pop("command")
            commands = [value] if isinstance(value, str) else value
            if not isinstance(commands, list) or not commands:
                self.fail(where, "expected a command line, a list of them, or {command: ...}")
            for i, cmd in enumerate(commands):
                if not isinstance(cmd, str) or not cmd.strip():
                    self.fail(f"{where}[{i}]", f"expected a command line, got {cmd!r}")
                for placeholder in PLACEHOLDER.findall(cmd):
                    if placeholder not in params and placeholder not in BUILTIN_PLACEHOLDERS:
                        self.fail(
                            f"{where}[{i}]",
                            f"{{{placeholder}}} names no parameter of this scheduler "
                            "(known: seed, replicate, run_dir"
                            + "".join(f", {p}" for p in params)
                            + ")",
                        )
            out[name] = Entity("scheduler", name, commands=tuple(commands), params=params)
        return out

    def files_or_generators(self, data: dict, key: str, root: Path) -> dict[str, Entity]:
        kind = key[:-1]
        out = {}
        for name, value in self.table(data, key).items():
            where = f"{key}.{name}"
            if isinstance(value, str):
                path = (root / value).resolve()
                if not path.is_file():
                    self.fail(where, f"no such file: {path}")
                out[name] = Entity(kind, name, path=str(path))
                continue
            if not isinstance(value, dict):
                self.fail(where, f"expected a file path or a generator mapping, got {_kind(value)}")
            gen = value.get("generator")
            allowed = ("platform",) if kind == "platform" else WORKLOAD_GENERATORS
            if gen not in allowed:
                self.fail(
                    f"{where}.generator",
                    f"expected one of {', '.join(allowed)}, got {gen!r}{did_you_mean(gen, allowed)}",
                )
            params = self.params(where, value, {"generator", "script"})
            if gen != "script":  # a mistyped flag is caught here, not by the generator later
                flags = generator_flags(gen)
                for pname in params:
                    if pname not in ("generator", "trace") and pname.replace("_", "-") not in flags:
                        self.fail(
                            f"{where}.{pname}",
                            f"timewarp workload {gen} has no --{pname.replace('_', '-')}"
                            f"{did_you_mean(pname.replace('_', '-'), flags)}",
                        )
            if gen == "script":
                script = params.get("script")
                if not isinstance(script, str) or not (root / script).is_file():
                    self.fail(f"{where}.script", f"no such generator script: {script!r}")
                params["script"] = str((root / script).resolve())
            if gen == "from-swf":
                trace = params.get("trace")
                if not isinstance(trace, str) or not (root / trace).is_file():
                    self.fail(f"{where}.trace", f"no such SWF file: {trace!r}")
                params["trace"] = str((root / trace).resolve())
            if "output" in params or "o" in params:
                self.fail(f"{where}.output", "the sweep chooses where generated inputs go")
            out[name] = Entity(kind, name, params=params)
        return out

    def modes(self, data: dict) -> dict[str, Entity]:
        out = {}
        for name, value in self.table(data, "modes").items():
            where = f"modes.{name}"
            value = {} if value is None else value
            if not isinstance(value, dict):
                self.fail(where, f"expected a mapping of simulate flags, got {_kind(value)}")
            mode = value.get("mode", name)
            if mode not in TIME_MODES:
                self.fail(f"{where}.mode", f"expected one of {', '.join(TIME_MODES)}, got {mode!r}")
            params = self.params(where, value, {"mode"})
            for pname in params:
                if "--" + pname.replace("_", "-") in SWEEP_OWNED_FLAGS:
                    self.fail(f"{where}.{pname}", f"--{pname} is chosen by the sweep for each run")
            params["mode"] = mode
            out[name] = Entity("mode", name, params=params)
        return out

    def too_many(self, where: str, points: str, replicates: int) -> None:
        self.fail(
            where,
            f"{points} points × {replicates:,} replicates is over the limit of {MAX_RUNS:,} "
            "runs per sweep (split the sweep, or use fewer levels or replicates)",
        )

    def points(
        self, data: dict, entities: dict[str, dict[str, Entity]], replicates: int
    ) -> list[Point]:
        max_points = MAX_RUNS // replicates
        grid = data.get("grid")
        rows = data.get("rows")
        selections: list[tuple[str, dict[str, str]]] = []
        if grid is not None or rows is None:
            grid = {} if grid is None else grid
            if not isinstance(grid, dict):
                self.fail("grid", f"expected a mapping of factor -> levels, got {_kind(grid)}")
            for key in grid:
                if key not in ENTITY_KINDS:
                    self.fail(
                        f"grid.{key}",
                        f"unknown factor{did_you_mean(key, ENTITY_KINDS)} (grid chooses "
                        f"{', '.join(ENTITY_KINDS)}; "
                        "parameter levels are lists inside their definition)",
                    )
            levels = []
            for kind in ENTITY_KINDS:
                names = grid.get(kind, list(entities[kind]))
                names = [names] if isinstance(names, str) else names
                if not isinstance(names, list) or not names:
                    self.fail(f"grid.{kind}", "expected a non-empty list of names")
                for n in names:
                    if n not in entities[kind]:
                        self.fail(
                            f"grid.{kind}",
                            f"no {kind} named {n!r} in {kind}s{did_you_mean(n, entities[kind])}",
                        )
                levels.append(names)
            # counted before anything is built: the grid's cells are distinct points, and
            # each kind's choices multiply (each entity by its own parameter levels)
            cells = math.prod(sum(_count(entities[k][n]) for n in names)
                              for k, names in zip(ENTITY_KINDS, levels, strict=True))  # fmt: skip
            if cells > max_points:
                self.too_many("grid", f"{cells:,}", replicates)
            for combo in itertools.product(*levels):
                selections.append(("grid", dict(zip(ENTITY_KINDS, combo, strict=True))))
        if rows is not None:
            if not isinstance(rows, list) or not rows:
                self.fail("rows", "expected a non-empty list of points")
            for i, row in enumerate(rows):
                where = f"rows[{i}]"
                if not isinstance(row, dict):
                    self.fail(where, f"expected a mapping, got {_kind(row)}")
                extra = sorted(set(row) - set(ENTITY_KINDS))
                if extra:
                    self.fail(
                        f"{where}.{extra[0]}",
                        f"unknown key{did_you_mean(extra[0], ENTITY_KINDS)} "
                        f"(a row chooses {ENTITY_KINDS})",
                    )
                chosen = {}
                for kind in ENTITY_KINDS:
                    name = row.get(kind)
                    if name is None and len(entities[kind]) == 1:
                        name = next(iter(entities[kind]))
                    if name not in entities[kind]:
                        self.fail(
                            f"{where}.{kind}",
                            f"no {kind} named {name!r} in {kind}s"
                            f"{did_you_mean(name, entities[kind])}",
                        )
                    chosen[kind] = name
                selections.append((where, chosen))
        points: list[Point] = []
        seen: set[str] = set()
        for where, chosen in selections:
            chosen_ents = {k: entities[k][chosen[k]] for k in ENTITY_KINDS}
            if len(points) + math.prod(_count(e) for e in chosen_ents.values()) > max_points:
                self.too_many(where, f"more than {max_points:,}", replicates)
            per_kind = [chosen_ents[k].expand() for k in ENTITY_KINDS]
            for combo in itertools.product(*per_kind):
                settings = dict(zip(ENTITY_KINDS, combo, strict=True))
                factors: dict[str, Scalar] = dict(chosen)
                for kind in ENTITY_KINDS:
                    for pname in chosen_ents[kind].factor_names():
                        factors[pname] = settings[kind][pname]
                key = json.dumps(factors, sort_keys=True)
                if key in seen:  # a row repeating a grid cell is one point, not two
                    continue
                seen.add(key)
                points.append(Point(chosen_ents, settings, factors))
        return points
