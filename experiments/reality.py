"""Reality, predicted: timewarp's pod start-up model fitted once on Batkube's spaced k3s
runs, then predicting burst and realistic (KIT) on k3s without refitting.

    .venv/bin/python -m experiments.reality -o out/reality     # ~100 runs, ~40 min at load 12

Every simulation is ``default_like`` in timewarp's deterministic mode, so the whole
command — fit included — gives the same figures every time. Four models of the real
cluster:

- ``default``: timewarp as it is by default (no start-up time; Batkube's platforms);
- ``startup``: the start-up model of ``broker/cluster/pod_lifecycle.py`` — every profile gets
  ``"timewarp": {"imagePullSeconds": P, "containerStartSeconds": S}`` (P once per node,
  pulls serial per node, the image then cached; S for every pod) — on Batkube's
  platforms, (P, S) fitted on spaced;
- ``coredns``: the same, refitted on spaced, on the platform k3s really offered: its
  CoreDNS pod (``manifests/coredns.yaml``: 100m CPU requested) sits on one worker, so one
  of the 16 one-cpu nodes cannot take a one-cpu pod (k3s never ran more than 15 at once in
  any of its 20 burst and spaced runs) and the KIT node has 5.9 of its 6 cpus left (the
  thesis normalised KIT's jobs to 5.9 cpus because a 6-cpu one would not fit). Modelled as
  100m less allocatable on the platform's last node;
- ``latency``: ``coredns`` plus ``--api-latency`` set to k3s's median submission-to-binding
  time of the pods that found room at once (40 ms), not fitted — spaced cannot tell it
  apart from 0 (every pod is decided alone there) — and (P, S) refitted with it.

The fit minimises the start-time error on spaced by rank: the root mean square, over
i, of the i-th simulated start minus the mean i-th start of the 10 real runs (the start
curve, whichever pod it was — mean wait and makespan follow from it). Which pod starts
when is not reproducible on k3s itself: kube-scheduler's back-off lets newer pods take
freed nodes while an older one waits (spaced job 18 of run 0 waited 1577 s), so two real
runs differ by hundreds of seconds job by job (the "by job" column, where the real row is
each run against the mean of the other nine: the floor). The search is a compass search
on (P, S) from the values the k3s event columns suggest (``experiments/k3s_logs.py``),
steps of ``--step`` halved down to ``--min-step`` (deterministic: the best of the four
neighbours P+, P-, S+, S-, ties to the first).

Reported per setup, beside Batkube's real runs (μ ± σ; the noise) and Batkube's own
simulation (kube-scheduler under Batkube, 20 runs): makespan and mean wait with their
error against the real mean, and the two start-time errors.

Also printed: how long a freed node stood idle before its next (waiting) pod started, on
spaced and burst; the fitted (P, S) beside what k3s's event columns say. Not modelled (see
docs/experiments.md): kube-scheduler's own back-off of unschedulable pods (the API-latency
model only approximates it through default_like's), image pulls slowing one another
across nodes (burst's cold run 0), kube-scheduler's order (the "by job" column).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from experiments import k3s_logs
from experiments._common import (
    DEFAULT_LIKE,
    load_average,
    print_table,
    run_simulate,
)
from experiments.batkube import SETUPS, Setup
from experiments.k3s_logs import Outcome

FIT_ON = "spaced"
PREDICT = ("burst", "realistic")
LABEL = {"spaced": "spaced (fitted)", "burst": "burst (predicted)", "realistic": "KIT (predicted)"}
COREDNS_CPU_M = 100  # k3s manifests/coredns.yaml: requests cpu 100m
JOB_DELAY_S = 170.0  # spaced's and burst's pods: 170 s delay profiles


@dataclass(frozen=True)
class Model:
    name: str
    fitted: bool  # start-up parameters fitted on spaced (else none)
    reserved_cpu_m: int  # CPU the cluster's own pods take on one node
    source: str  # the table's label
    api_latency: bool = False  # k3s's binding delay as --api-latency (not fitted)


MODELS = {
    "default": Model("default", False, 0, "timewarp default (no start-up)"),
    "startup": Model("startup", True, 0, "timewarp + start-up fitted (Batkube's platform)"),
    "coredns": Model("coredns", True, COREDNS_CPU_M, "timewarp + start-up fitted + CoreDNS"),
    "latency": Model(
        "latency",
        True,
        COREDNS_CPU_M,
        "timewarp + start-up fitted + CoreDNS + API latency",
        api_latency=True,
    ),
}


# ----------------------------------------------------------------------- inputs
def reserve_cpu(platform_xml: str, millicores: int) -> str:
    """The platform with ``millicores`` less cpu on its last compute host (not the
    master): what a system pod's request leaves to the others."""
    if millicores == 0:
        return platform_xml
    hosts = list(re.finditer(r"<host\b[^>]*>.*?</host>", platform_xml, re.S))
    compute = [h for h in hosts if not re.search(r'<prop id="role" value="master"', h.group())]
    if not compute:
        raise ValueError("the platform has no compute host")
    host = compute[-1]
    core = re.search(r'<prop id="core" value="([^"]+)"\s*/>', host.group())
    cores = float(core.group(1)) if core else 1.0
    left = cores - millicores / 1000
    if left <= 0:
        raise ValueError(f"{cores:g} cpu on the last host, {millicores}m reserved")
    prop = f'<prop id="core" value="{left:g}"/>'
    if core:
        block = host.group().replace(core.group(), prop, 1)
    else:
        block = re.sub(r"(<host\b[^>]*>)", rf"\1{prop}", host.group(), count=1)
    return platform_xml[: host.start()] + block + platform_xml[host.end() :]


def with_startup(workload: dict, pull_s: float, start_s: float, jobs: int = 0) -> dict:
    """A copy of a Batsim workload whose profiles carry the start-up keys (none at 0/0),
    cut to its first ``jobs`` jobs (0: all)."""
    doc = json.loads(json.dumps(workload))
    if jobs:
        doc["jobs"] = doc["jobs"][:jobs]
    if pull_s or start_s:
        for profile in doc["profiles"].values():
            ext = profile.setdefault("timewarp", {})
            ext["imagePullSeconds"] = pull_s
            ext["containerStartSeconds"] = start_s
    return doc


def job_ids(setup: Setup, jobs: int) -> frozenset[str]:
    listed = json.loads(setup.workload.read_text())["jobs"]
    return frozenset(str(j["id"]) for j in (listed[:jobs] if jobs else listed))


# ----------------------------------------------------------------------- the search
def compass_search(
    f: Callable[[tuple[float, float]], float],
    start: tuple[float, float],
    step: float,
    min_step: float,
) -> tuple[tuple[float, float], float]:
    """Minimise ``f`` over points ≥ 0 on the grid of ``min_step``: from ``start`` (snapped),
    move to the best of the four neighbours at ``step`` while one is strictly better, else
    halve the step, until it falls below ``min_step``. ``step`` is rounded to
    ``min_step`` × a power of two so every point stays on the grid."""
    if not (min_step > 0 and step >= min_step):
        raise ValueError(f"need step >= min_step > 0, got {step} and {min_step}")
    h = min_step * 2 ** math.floor(math.log2(step / min_step) + 1e-9)

    def snap(v: float) -> float:
        return round(max(0.0, v) / min_step) * min_step

    x = (snap(start[0]), snap(start[1]))
    fx = f(x)
    while h >= min_step - 1e-12:
        candidates = [
            (snap(x[0] + h), x[1]),
            (snap(x[0] - h), x[1]),
            (x[0], snap(x[1] + h)),
            (x[0], snap(x[1] - h)),
        ]
        best, fbest = x, fx
        for c in candidates:
            if c != x:
                fc = f(c)
                if fc < fbest:
                    best, fbest = c, fc
        if best == x:
            h /= 2
        else:
            x, fx = best, fbest
    return x, fx


# ----------------------------------------------------------------------- runs
@dataclass
class Experiment:
    out: Path
    scheduler: str
    timeout_s: float
    jobs: int
    api_latency_ms: int = 0  # for the models that have one
    runs: dict[str, dict] = field(default_factory=dict)  # key -> record
    failures: list[str] = field(default_factory=list)

    def simulate(self, model: Model, setup: Setup, pull_s: float, start_s: float) -> Outcome:
        """One deterministic run of ``setup`` under ``model`` with (P, S); each distinct
        run is made once."""
        tag = f"{model.name}/{setup.name}/p{pull_s:g}-s{start_s:g}"
        where = self.out / tag
        if tag not in self.runs:
            where.mkdir(parents=True, exist_ok=True)
            platform = where / "platform.xml"
            platform.write_text(reserve_cpu(setup.platform.read_text(), model.reserved_cpu_m))
            workload = where / "workload.json"
            doc = with_startup(json.loads(setup.workload.read_text()), pull_s, start_s, self.jobs)
            workload.write_text(json.dumps(doc, indent=1))
            extra = ["--api-latency", f"{self.api_latency_ms}ms"] if model.api_latency else []
            run = run_simulate(
                [self.scheduler], platform, [workload], where / "run", extra, self.timeout_s
            )
            self.runs[tag] = {
                "ok": run.ok,
                "wall_s": round(run.wall_s, 2),
                "figures": {k: run.figures.get(k) for k in ("makespan", "mean_waiting_time")},
            }
            status = "ok" if run.ok else f"FAILED ({run.returncode}): {run.stderr[-300:]}"
            print(
                f"  {tag}: makespan {run.figure('makespan'):.1f}, "
                f"mean wait {run.figure('mean_waiting_time'):.1f}, "
                f"wall {run.wall_s:.1f} s, {status}",
                file=sys.stderr,
                flush=True,
            )
            if not run.ok:
                self.failures.append(tag)
                raise RuntimeError(f"{tag} failed: {run.stderr[-2000:]}")
        return Outcome.read(where / "run" / "out_jobs.csv")


@dataclass(frozen=True)
class Reference:
    """One setup's real runs and Batkube's simulated runs, on the jobs compared."""

    setup: Setup
    real: list[Outcome]
    batkube: list[Outcome]

    @classmethod
    def load(cls, name: str, jobs: int) -> Reference:
        setup = SETUPS[name]
        only = job_ids(setup, jobs)
        return cls(
            setup,
            k3s_logs.real_runs(setup.real_glob, only),
            k3s_logs.real_runs(setup.simu_glob, only),
        )

    def error(self, run: Outcome, by: str = "rank") -> float:
        return k3s_logs.start_rmse(run, k3s_logs.mean_starts(self.real, by))


def fit(exp: Experiment, model: Model, spaced: Reference, start: tuple[float, float],
        step: float, min_step: float) -> dict:  # fmt: skip
    """(P, S) of ``model`` fitted on spaced; the record of every point tried."""
    tried: dict[tuple[float, float], float] = {}

    def objective(x: tuple[float, float]) -> float:
        if x not in tried:
            tried[x] = spaced.error(exp.simulate(model, spaced.setup, *x))
        return tried[x]

    (pull, start_s), rmse = compass_search(objective, start, step, min_step)
    return {
        "pull_s": pull,
        "start_s": start_s,
        "start_rmse_s": round(rmse, 3),
        "tried": [
            {"pull_s": p, "start_s": s, "start_rmse_s": round(v, 3)} for (p, s), v in tried.items()
        ],
    }


# ----------------------------------------------------------------------- the table
HEADERS = [
    "setup",
    "source",
    "runs",
    "makespan (s)",
    "error",
    "mean wait (s)",
    "error",
    "start error by rank (s)",
    "by job (s)",
    "node idle between pods (s)",
]
ONE_POD_PER_NODE = ("spaced", "burst")  # where a node's idle time between pods means something


def _pct(value: float, truth: float) -> str:
    return f"{value - truth:+.1f} ({(value - truth) / truth:+.1%})"


def mean_idle(runs: list[Outcome]) -> float | None:
    """A node's mean idle time before a waiting pod, pooled over ``runs``."""
    gaps = [g for r in runs for g in r.idle]
    return statistics.fmean(gaps) if gaps else None


def table_rows(ref: Reference, ours: list[tuple[str, Outcome]]) -> list[dict]:
    """The real runs (their noise), Batkube's simulation and each of ours, as records."""
    chains = ref.setup.name in ONE_POD_PER_NODE
    real_m = [r.makespan for r in ref.real]
    real_w = [r.mean_wait for r in ref.real]
    truth_m, truth_w = statistics.fmean(real_m), statistics.fmean(real_w)
    noise = {by: k3s_logs.noise_rmse(ref.real, by) for by in ("rank", "job")}
    rows = [
        {
            "source": "Batkube real k3s",
            "runs": len(ref.real),
            "makespan": truth_m,
            "makespan_sd": statistics.stdev(real_m) if len(real_m) > 1 else None,
            "mean_wait": truth_w,
            "mean_wait_sd": statistics.stdev(real_w) if len(real_w) > 1 else None,
            **{f"start_rmse_{by}": statistics.median(v) if v else None for by, v in noise.items()},
            "node_idle": mean_idle(ref.real) if chains else None,
        }
    ]

    def add(source: str, runs: list[Outcome]) -> None:
        rows.append(
            {
                "source": source,
                "runs": len(runs),
                "makespan": statistics.fmean(r.makespan for r in runs),
                "makespan_error": statistics.fmean(r.makespan for r in runs) - truth_m,
                "mean_wait": statistics.fmean(r.mean_wait for r in runs),
                "mean_wait_error": statistics.fmean(r.mean_wait for r in runs) - truth_w,
                **{
                    f"start_rmse_{by}": statistics.fmean(ref.error(r, by) for r in runs)
                    for by in ("rank", "job")
                },
                "node_idle": mean_idle(runs) if chains else None,
            }
        )

    add("Batkube simulated (kube-scheduler)", ref.batkube)
    for source, run in ours:
        add(source, [run])
    return rows


def cells(setup: str, row: dict) -> list[str]:
    def sd(key: str) -> str:
        value = row.get(f"{key}_sd")
        return f"{row[key]:.1f} ± {value:.1f}" if value is not None else f"{row[key]:.1f}"

    truth_m = row["makespan"] - row.get("makespan_error", 0.0)
    truth_w = row["mean_wait"] - row.get("mean_wait_error", 0.0)
    real = "makespan_error" not in row
    return [
        LABEL[setup],
        row["source"],
        str(row["runs"]),
        sd("makespan"),
        "-" if real else _pct(row["makespan"], truth_m),
        sd("mean_wait"),
        "-" if real else _pct(row["mean_wait"], truth_w),
        *(
            "-" if row[k] is None else f"{row[k]:.1f}"
            for k in ("start_rmse_rank", "start_rmse_job", "node_idle")
        ),
    ]


# ----------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.reality", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--model",
        action="append",
        choices=list(MODELS),
        help="only these models (repeatable; default: all four)",
    )
    parser.add_argument(
        "--jobs",
        type=_count,
        default=0,
        help="only the first N jobs of each workload, compared with the same jobs' real "
        "times (0: all; a quick check — the tests use 16 — not a prediction)",
    )
    parser.add_argument("--step", type=_seconds, default=2.0, help="first search step (s)")
    parser.add_argument("--min-step", type=_seconds, default=0.125, help="last search step (s)")
    parser.add_argument("--scheduler", default=DEFAULT_LIKE, help="scheduler command line")
    parser.add_argument("--timeout", type=float, default=600.0, help="wall seconds per run")
    parser.add_argument("-o", "--output", default="experiments-out/reality", metavar="DIR")
    return parser


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.step < args.min_step:
        parser.error(f"--step {args.step:g} is below --min-step {args.min_step:g}")
    out = Path(args.output)
    models = [MODELS[m] for m in (args.model or MODELS)]
    print(f"machine load before: {load_average()}", file=sys.stderr)

    logs = k3s_logs.startup_phases(SETUPS[FIT_ON].real_glob, JOB_DELAY_S)
    latency_ms = round(logs.binding_s * 1000)
    exp = Experiment(out, args.scheduler, args.timeout, args.jobs, latency_ms)
    gaps = k3s_logs.rebind_gaps(SETUPS["burst"].real_glob)
    start = (logs.first_extra_s, logs.per_pod_s)
    refs = {name: Reference.load(name, args.jobs) for name in (FIT_ON, *PREDICT)}
    record: dict = {
        "load_before": load_average(),
        "jobs": args.jobs or "all",
        "k3s_logs": {
            "slots": logs.slots,
            "first_pod_phases": logs.first,
            "later_pod_phases": logs.later,
            "first_pods": logs.first_pods,
            "later_pods": logs.later_pods,
            "cold_pull_runs": logs.cold_pull_runs,
            "cold_pull_s": logs.cold_pull_s,
            "overrun_s": logs.overrun_s,
            "per_pod_s": logs.per_pod_s,
            "first_extra_s": logs.first_extra_s,
            "binding_s": logs.binding_s,
            "api_latency_ms": latency_ms,
            "burst_rebind_gap_mean_s": statistics.fmean(gaps),
            "burst_rebind_gap_median_s": statistics.median(gaps),
        },
        "models": {},
    }
    ours: dict[str, list[tuple[str, Outcome]]] = {name: [] for name in refs}
    try:
        for model in models:
            params = (0.0, 0.0)
            if model.fitted:
                print(f"fitting {model.name} on {FIT_ON} ...", file=sys.stderr, flush=True)
                found = fit(exp, model, refs[FIT_ON], start, args.step, args.min_step)
                params = (found["pull_s"], found["start_s"])
                record["models"][model.name] = found
            label = model.source
            if model.api_latency:
                label += f" {exp.api_latency_ms} ms"
            for name, ref in refs.items():
                ours[name].append((label, exp.simulate(model, ref.setup, *params)))
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        record["runs"] = exp.runs
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(record, indent=1) + "\n")
        return 1

    rows = []
    for name, ref in refs.items():
        for row in table_rows(ref, ours[name]):
            rows.append({"setup": name, **row})
    record["rows"] = rows
    record["runs"] = exp.runs
    record["load_after"] = load_average()
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(record, indent=1) + "\n")

    print_table(HEADERS, [cells(r["setup"], r) for r in rows])
    print()
    print_table(
        ["model", "imagePullSeconds (s)", "containerStartSeconds (s)", "spaced start error (s)",
         "runs tried"],
        [[m.name, f"{record['models'][m.name]['pull_s']:g}",
          f"{record['models'][m.name]['start_s']:g}",
          f"{record['models'][m.name]['start_rmse_s']:.2f}",
          str(len(record['models'][m.name]['tried']))] for m in models if m.fitted]
        + [["k3s events (spaced)", f"{logs.first_extra_s:.2f} (first pod on a node, extra)",
            f"{logs.per_pod_s:.2f} (scheduled→started {logs.later['scheduled→started']:.2f}"
            f" + run overrun {logs.overrun_s:.2f})", "-", "-"]],
    )  # fmt: skip
    print(
        f"k3s: at most {logs.slots} pods at once; cold image pulls in spaced runs "
        f"{logs.cold_pull_runs} ({logs.cold_pull_s:.2f} s); burst: a freed node is "
        f"rebound after {statistics.fmean(gaps):.2f} s on average (median "
        f"{statistics.median(gaps):.2f} s), spaced after "
        f"{statistics.fmean(k3s_logs.rebind_gaps(SETUPS[FIT_ON].real_glob)):.2f} s"
    )
    print(f"machine load after: {record['load_after']}; details in {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
