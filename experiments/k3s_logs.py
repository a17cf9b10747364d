"""Batkube's real k3s runs read as runs, and what their event columns say about a pod's
start-up (for ``experiments/reality.py``).

Batkube's real-cluster CSVs (``results/*_jobs.csv`` without ``_simu_``) have Batsim's
columns plus four timestamps its Go watcher took from the pods' events: ``scheduled``
(the binding), ``pulling`` / ``pulled`` (the kubelet's image events), ``created`` (the
container), and ``starting_time`` is the container's start. ``allocated_resources`` is
the node; ``scheduled`` and the node are missing for about one pod in seven (the watcher
missed the event).

An :class:`Outcome` is one run reduced to what the comparison needs, per job: submitted,
started, finished — from Batkube's CSVs and from timewarp's ``out_jobs.csv`` alike.
"""

from __future__ import annotations

import glob
import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments._common import BATKUBE, read_rows


@dataclass(frozen=True)
class Outcome:
    """One run's jobs: submission, start and finish time by job id (jobs that started)."""

    submits: dict[str, float]
    starts: dict[str, float]
    finishes: dict[str, float]
    idle: tuple[float, ...] = ()  # node idle times before a waiting pod (:func:`idle_gaps`)

    @classmethod
    def read(cls, path: Path | str, only: frozenset[str] | None = None) -> Outcome:
        """A Batsim-style ``jobs.csv`` (timewarp's or Batkube's), restricted to ``only``."""
        rows = [
            r
            for r in read_rows(path)
            if r.get("starting_time") not in ("", None) and (only is None or r["job_id"] in only)
        ]
        if not rows:
            raise ValueError(f"{path}: no job started")
        return cls(
            {r["job_id"]: float(r["submission_time"]) for r in rows},
            {r["job_id"]: float(r["starting_time"]) for r in rows},
            {r["job_id"]: float(r["finish_time"]) for r in rows},
            tuple(_gaps(rows, "starting_time")),
        )

    @property
    def makespan(self) -> float:
        return max(self.finishes.values())

    @property
    def mean_wait(self) -> float:
        return statistics.fmean(self.starts[j] - self.submits[j] for j in self.starts)

    def sorted_starts(self) -> list[float]:
        return sorted(self.starts.values())


def real_runs(pattern: str, only: frozenset[str] | None = None) -> list[Outcome]:
    """Every real-cluster run matching ``pattern`` in Batkube's results (sorted by name)."""
    return [Outcome.read(p, only) for p in _paths(pattern)]


def _paths(pattern: str) -> list[str]:
    paths = sorted(glob.glob(str(BATKUBE / "results" / pattern)))
    if not paths:
        raise FileNotFoundError(f"no Batkube results match {BATKUBE / 'results' / pattern}")
    return paths


# ----------------------------------------------------------------------- start-time error
def mean_starts(runs: Sequence[Outcome], by: str) -> list[float] | dict[str, float]:
    """The reference the start-time error is measured against: the mean start of each job
    over ``runs`` (``by="job"``), or the mean of each rank's start (``by="rank"``: the
    i-th pod to start, whichever it was)."""
    if by == "rank":
        columns = list(zip(*(r.sorted_starts() for r in runs), strict=True))
        return [statistics.fmean(c) for c in columns]
    jobs = set.intersection(*(set(r.starts) for r in runs))
    return {j: statistics.fmean(r.starts[j] for r in runs) for j in sorted(jobs)}


def start_rmse(run: Outcome, reference: list[float] | dict[str, float]) -> float:
    """Root mean square of ``run``'s start times minus the reference's (by job or rank)."""
    if isinstance(reference, dict):
        diffs = [run.starts[j] - t for j, t in reference.items()]
    else:
        ours = run.sorted_starts()
        if len(ours) != len(reference):
            raise ValueError(f"{len(ours)} starts against {len(reference)} in the reference")
        diffs = [a - b for a, b in zip(ours, reference, strict=True)]
    return math.sqrt(statistics.fmean(d * d for d in diffs))


def noise_rmse(runs: Sequence[Outcome], by: str) -> list[float]:
    """Each real run's start-time error against the mean of the others: the floor no model
    of this cluster can go below (empty with fewer than two runs)."""
    if len(runs) < 2:
        return []
    return [
        start_rmse(run, mean_starts([r for k, r in enumerate(runs) if k != i], by))
        for i, run in enumerate(runs)
    ]


# ----------------------------------------------------------------------- event columns
def max_concurrency(outcomes: Iterable[Outcome]) -> int:
    """The most pods that ever ran at once in any of the runs."""
    best = 0
    for run in outcomes:
        events = sorted(
            [(t, 1) for t in run.starts.values()] + [(t, -1) for t in run.finishes.values()],
            key=lambda e: (e[0], e[1]),  # a finish before a start at the same instant
        )
        level = 0
        for _, step in events:
            level += step
            best = max(best, level)
    return best


@dataclass(frozen=True)
class StartupPhases:
    """Medians (s) of a pod's start-up phases in the real runs, for the first pod on each
    node in a run and for the others, plus how long past its nominal duration a pod is
    reported to run."""

    first: dict[str, float]  # phase -> median, first pods on their node
    later: dict[str, float]
    first_pods: int
    later_pods: int
    cold_pull_runs: list[int]  # runs whose first pods pulled the image for real
    cold_pull_s: float  # median pulling -> pulled of those first pods
    overrun_s: float  # median execution_time - the profile's delay
    slots: int  # the most pods running at once
    binding_s: float  # median submission -> scheduled of the pods that found room at once

    @property
    def per_pod_s(self) -> float:
        """What a pod costs a node's chain beyond its run time, once the node is warm:
        scheduled -> started, plus the overrun."""
        return self.later["scheduled→started"] + self.overrun_s

    @property
    def first_extra_s(self) -> float:
        """What the first pod on a node costs beyond a later one."""
        return self.first["scheduled→started"] - self.later["scheduled→started"]


PHASES = {
    "scheduled→pulling": ("scheduled", "pulling"),
    "pulling→pulled": ("pulling", "pulled"),
    "pulled→started": ("pulled", "starting_time"),
    "scheduled→started": ("scheduled", "starting_time"),
}
MISSED_POD_S = 60.0  # shorter than any pod's run in the setups compared
COLD_PULL_S = 2.0  # a real pull takes seconds; a cached image's registry check ~0.9 s


def startup_phases(pattern: str, delay_s: float) -> StartupPhases:
    """The event columns of the real runs matching ``pattern``, whose jobs run
    ``delay_s`` each. The first ``slots`` pods to start in a run are each the first on
    their node (no node frees before every slot is taken: true of spaced and burst)."""
    runs = [read_rows(p) for p in _paths(pattern)]
    slots = max_concurrency(Outcome.read(p) for p in _paths(pattern))
    first: dict[str, list[float]] = {k: [] for k in PHASES}
    later: dict[str, list[float]] = {k: [] for k in PHASES}
    cold_runs, cold = [], []
    overrun, binding = [], []
    for index, rows in enumerate(runs):
        rows = sorted(rows, key=lambda r: float(r["starting_time"]))
        run_cold = []
        for rank, row in enumerate(rows):
            overrun.append(float(row["execution_time"]) - delay_s)
            into = first if rank < slots else later
            for phase, (a, b) in PHASES.items():
                if row[a] and row[b]:
                    into[phase].append(float(row[b]) - float(row[a]))
            if rank < slots and row["scheduled"]:
                binding.append(float(row["scheduled"]) - float(row["submission_time"]))
            if rank < slots and row["pulling"] and row["pulled"]:
                pull = float(row["pulled"]) - float(row["pulling"])
                if pull > COLD_PULL_S:
                    run_cold.append(pull)
        if len(run_cold) > slots // 2:
            cold_runs.append(index)
            cold.extend(run_cold)
    return StartupPhases(
        {k: statistics.median(v) for k, v in first.items()},
        {k: statistics.median(v) for k, v in later.items()},
        len(first["scheduled→started"]),
        len(later["scheduled→started"]),
        cold_runs,
        statistics.median(cold) if cold else math.nan,
        statistics.median(overrun),
        slots,
        statistics.median(binding),
    )


def rebind_gaps(pattern: str) -> list[float]:
    """For each pod that was waiting when the previous pod on its node finished: the time
    from that finish to its binding (``scheduled``) — the scheduler's reaction, not the
    kubelet's. Pods whose node or binding the watcher missed are left out."""
    return [g for p in _paths(pattern) for g in _gaps(read_rows(p), "scheduled")]


def _gaps(rows: list[dict[str, str]], until: str) -> list[float]:
    """For each pod that was waiting when the previous pod on its node finished: the time
    from that finish to the pod's ``until`` (its binding, its start); rows without a node
    are left out. Meaningful where a node runs one pod at a time."""
    by_node: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        if row["allocated_resources"] and row.get(until):
            by_node.setdefault(row["allocated_resources"], []).append(row)
    gaps = []
    for chain in by_node.values():
        chain.sort(key=lambda r: float(r["starting_time"]))
        for before, after in itertools.pairwise(chain):
            freed = float(before["finish_time"])
            gap = float(after[until]) - freed
            # a gap of a whole pod's run means the watcher missed the pod in between
            if float(after["submission_time"]) < freed and 0 <= gap < MISSED_POD_S:
                gaps.append(gap)
    return gaps
