"""The estimator-corrector (the paper's Algorithm 2).

A running pod is first expected to take the minimum running time its image ever took on
that slot. Whenever the current time passes the estimated completion, the estimate is
raised: MIN -> AVG -> MAX, and after that MIN is added at each correction
(``ED_N = ED_P + MIN_ED``). The estimated completion is
``started + ED * slowdown`` with the slowdown Θ_P = P the pod was placed with.

Difference from the paper, on purpose: the paper corrects one step per verification,
and verifies whenever the decision unit runs. Here one verification applies steps until
the estimate lies in the future again, so an estimate never stays in the past (which
would make a busy GPU look free) however rarely the decision unit happens to run.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .model import Estimate, Stats, Technique


def next_estimate(estimate: Estimate, stats: Stats) -> Estimate:
    """One step of Algorithm 2: the next technique and its estimated duration."""
    if estimate.technique == Technique.MIN:
        return replace(estimate, technique=Technique.AVG, duration=stats.average)
    if estimate.technique == Technique.AVG:
        return replace(estimate, technique=Technique.MAX, duration=stats.maximum)
    return replace(
        estimate, technique=Technique.PLUS_MIN, duration=estimate.duration + stats.minimum
    )


def correct(estimate: Estimate, now: float, stats: Stats) -> Estimate:
    """Return ``estimate`` corrected so that ``end >= now`` (unchanged if it already is).

    Steps never lower the duration (an estimate that started above AVG or MAX keeps its
    value until PLUS_MIN grows it). The PLUS_MIN steps are counted in closed form, not
    looped, so a tiny MIN cannot stall the scheduler; a zero MIN cannot move the
    estimate at all, and then the completion is assumed to be now.
    """
    while estimate.end < now and estimate.technique < Technique.MAX:
        stepped = next_estimate(estimate, stats)
        estimate = replace(stepped, duration=max(stepped.duration, estimate.duration))
    if estimate.end >= now:
        return estimate
    needed = (now - estimate.started) / estimate.slowdown  # duration that ends exactly now
    ratio = (needed - estimate.duration) / stats.minimum if stats.minimum > 0 else math.inf
    if math.isfinite(ratio):
        duration = estimate.duration + max(1, math.ceil(ratio)) * stats.minimum
    else:
        duration = needed
    return replace(estimate, technique=Technique.PLUS_MIN, duration=max(duration, needed))


def initial_estimate(
    uid: str,
    image: str,
    slot,
    started: float,
    stats: Stats,
    slowdown: int = 1,
    cpu: float = 0.0,
    memory: float = 0.0,
) -> Estimate:
    """A new EP-table row: the MIN technique, as the paper starts."""
    return Estimate(
        uid=uid,
        image=image,
        slot=slot,
        started=started,
        duration=stats.minimum,
        technique=Technique.MIN,
        slowdown=max(1, slowdown),
        cpu=cpu,
        memory=memory,
    )
