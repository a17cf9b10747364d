"""The figures a comparison shows, which way is better, and how a group of replicates
(runs of one configuration, e.g. a sweep point over its seeds) is summed up: its mean,
with the spread over the runs — the sample standard deviation, the lowest and highest
value, and how many runs gave one when some did not (``20.0 ± 10.0 [10.0–30.0]``).

The best group on a figure is the one with the best mean. With replicates, a best whose
range [lowest–highest] overlaps another group's is marked as within the spread (``(★)``:
the seeds alone could have made the difference); one whose range is clear of every other
group's gets ``★``, as a single run's best does."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from commands.comparing.runs import Run, first_divergence, inputs_of, seed_of


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    fmt: str  # a format for one value
    better: str | None  # "lower", "higher" or None (not a matter of better)


BATCH = (
    Figure("jobs", "batch jobs", "{:,.0f}", None),
    Figure("jobs_failed", "jobs not completed", "{:,.0f}", "lower"),
    Figure("makespan", "makespan (s)", "{:,.1f}", "lower"),
    Figure("waiting_mean", "waiting time mean (s)", "{:,.1f}", "lower"),
    Figure("waiting_p50", "waiting time p50 (s)", "{:,.1f}", "lower"),
    Figure("waiting_p95", "waiting time p95 (s)", "{:,.1f}", "lower"),
    Figure("waiting_p99", "waiting time p99 (s)", "{:,.1f}", "lower"),
    Figure("waiting_max", "waiting time max (s)", "{:,.1f}", "lower"),
    Figure("slowdown_mean", "slowdown mean", "{:,.3f}", "lower"),
    Figure("slowdown_p50", "slowdown p50", "{:,.3f}", "lower"),
    Figure("slowdown_p95", "slowdown p95", "{:,.3f}", "lower"),
    Figure("slowdown_p99", "slowdown p99", "{:,.3f}", "lower"),
    Figure("utilisation_mean", "nodes busy (time average)", "{:.1%}", None),
)
SERVICE = (
    Figure("requests", "requests", "{:,.0f}", None),
    Figure("failed", "failed requests", "{:,.0f}", "lower"),
    Figure("failed_share", "failed share", "{:.3%}", "lower"),
    Figure("latency_p50", "latency p50 (s, tick-weighted)", "{:.4f}", "lower"),
    Figure("latency_p95", "latency p95 (s, tick-weighted)", "{:.4f}", "lower"),
    Figure("latency_p99", "latency p99 (s, tick-weighted)", "{:.4f}", "lower"),
    Figure("latency_p99_worst_tick", "latency p99, worst tick (s)", "{:.4f}", "lower"),
    Figure("ticks_within_slo", "ticks within the SLO", "{:.1%}", "higher"),
    Figure("replicas_mean", "Ready replicas (time average)", "{:.2f}", None),
    Figure("replicas_max", "desired replicas (highest)", "{:,.0f}", None),
    Figure("replica_hours", "replica-hours", "{:,.2f}", "lower"),
)
COST = (
    Figure("wall_s", "wall time of the simulation (s)", "{:,.2f}", None),
    Figure("nondeterministic_advances", "non-deterministic advances", "{:,.0f}", None),
)


@dataclass
class Group:
    """Runs of one configuration (one run, or its replicates)."""

    label: str
    runs: list[Run]

    def values(self, key: str, service: str | None = None) -> list[float]:
        out = []
        for run in self.runs:
            if service is None:
                value = run.figures.get(key)
            else:
                svc = run.services.get(service)
                value = svc.figures.get(key) if svc else None
            if value is not None:
                out.append(float(value))
        return out

    def summary(self, key: str, service: str | None = None) -> float | None:
        """The mean over the group's runs (None when no run has the figure)."""
        values = self.values(key, service)
        return statistics.fmean(values) if values else None


BEST = "★ "  # the best mean, clear of every other group's range
BEST_WITHIN_SPREAD = "(★) "  # the best mean, but its range overlaps another group's


def cell(group: Group, figure: Figure, service: str | None = None) -> str:
    """One group's figure: a run's value, or a group's mean ± σ [lowest–highest]; "n=k"
    when only k of its runs have the figure."""
    values = group.values(figure.key, service)
    if not values:
        return "–"
    fmt = figure.fmt.format
    if len(values) == 1:
        text = fmt(values[0])
    elif min(values) == max(values):
        text = f"{fmt(values[0])} (×{len(values)})"
    else:
        mean, sd = statistics.fmean(values), statistics.stdev(values)
        text = f"{fmt(mean)} ± {fmt(sd)} [{fmt(min(values))}–{fmt(max(values))}]"
    if len(group.runs) > 1 and len(values) < len(group.runs):
        text += f" n={len(values)}"
    return text


def best(groups: list[Group], figure: Figure, service: str | None = None) -> dict[int, str]:
    """The groups with the best mean on ``figure``, each with its mark (:data:`BEST`, or
    :data:`BEST_WITHIN_SPREAD` when its range overlaps another group's); none when all
    are equal or the figure has no direction."""
    if figure.better is None or len(groups) < 2:
        return {}
    summaries = [g.summary(figure.key, service) for g in groups]
    known = [s for s in summaries if s is not None]
    if len(known) < 2 or min(known) == max(known):
        return {}
    lower = figure.better == "lower"
    target = min(known) if lower else max(known)
    winners = {i for i, s in enumerate(summaries) if s == target}
    ranges = [g.values(figure.key, service) for g in groups]
    others = [r for j, r in enumerate(ranges) if r and j not in winners]
    marks = {}
    for i in sorted(winners):
        worst = max(ranges[i]) if lower else min(ranges[i])
        clear = all(worst < min(r) if lower else worst > max(r) for r in others)
        marks[i] = BEST if clear else BEST_WITHIN_SPREAD
    return marks


def services_of(groups: list[Group]) -> list[str]:
    return sorted({name for g in groups for run in g.runs for name in run.services})


def has_batch(groups: list[Group]) -> bool:
    return any(run.figures.get("jobs") for g in groups for run in g.runs)


def _per_column(groups: list[Group], key) -> str:  # type: ignore[no-untyped-def]
    """ "the same" (one value for every run), "the same in every column" (each column has
    the same collection, e.g. replicates over the same seeds), or how they differ."""
    columns = [sorted(key(run) for run in g.runs) for g in groups]
    flat = {v for column in columns for v in column}
    if len(flat) == 1:
        return "the same"
    if all(c == columns[0] for c in columns) and len(groups) > 1:
        return f"the same in every column ({len(flat)} per column)"
    if len(groups) == 1:
        return f"{len(flat)} different"
    return "different between columns"


def sameness(groups: list[Group]) -> dict[str, str]:
    """Whether the runs had the same inputs (by content), schedulers and seeds."""
    runs = [run for g in groups for run in g.runs]
    out: dict[str, str] = {}
    if any(not inputs_of(r) for r in runs):
        out["inputs (by content)"] = "unknown (a run has no manifest)"
    else:
        out["inputs (by content)"] = _per_column(groups, inputs_of)
    out["schedulers"] = _per_column(groups, lambda r: tuple(r.manifest.get("schedulers") or ()))
    seeds = [seed_of(r) for r in runs]
    if all(s is None for s in seeds):
        out["seeds"] = "none given (the runs' own defaults)"
    elif len(runs) <= 6 and len(set(seeds)) > 1 and all(len(g.runs) == 1 for g in groups):
        out["seeds"] = ", ".join(str(s) for s in seeds)
    else:
        out["seeds"] = _per_column(groups, lambda r: str(seed_of(r)))
    firsts = [g.runs[0] for g in groups]
    if len(firsts) > 1:
        diverged = [first_divergence(firsts[0], other) for other in firsts[1:]]
        out["first decision that differs"] = " | ".join(
            d or f"none: {o.label} decided as {firsts[0].label}"
            for d, o in zip(diverged, firsts[1:], strict=True)
        )
    return out
