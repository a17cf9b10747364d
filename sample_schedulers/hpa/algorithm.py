"""The Horizontal Pod Autoscaler's arithmetic, as kube-controller-manager does it
(``pkg/controller/podautoscaler``: ``replica_calculator.go``, ``horizontal.go``).

Pure functions and one small state object; no API calls (``controller.py`` does those).

Per metric (``replicas_for_*``):

- ``desired = ceil(ready × usage / target)`` over the pods that count — the
  ``usageRatio`` is the metric over its target (for ``Utilization`` targets: the sum of
  usage over the sum of requests of the pods with metrics, in percent of request);
- within the **tolerance** (0.1: ``|1 − ratio| ≤ 0.1``) nothing changes;
- **pending** pods are ignored; pods being deleted or Failed do not exist (their
  metrics are dropped, as the current controller does);
- for cpu, **not-ready** pods are ignored: a pod with no Ready condition, or — while it is
  younger than the cpu initialisation period (300 s) — unready or with a sample that
  does not cover a full window since it last turned Ready, or — later — unready and
  never ready since its start-up (the initial readiness delay, 30 s);
- pods **missing** metrics count as using 100 % of their request (or the target, for
  non-utilisation metrics) on a scale-down and 0 % on a scale-up; ignored pods count as
  0 % on a scale-up; if that flips the direction, or lands within the tolerance, nothing
  changes.

Across metrics the largest proposal wins; if a metric could not be computed, a scale-down
is not made. The proposal is then normalised (:class:`Normalizer`):

- no ``behavior``: the highest recommendation of the last 300 s (the downscale
  stabilisation window) wins, a scale-up is limited to ``max(2 × current, 4)``, and the
  result is clamped to [minReplicas, maxReplicas];
- with ``behavior`` (defaults as the API server fills them: scale-up window 0 s, policies
  100 % or 4 pods per 15 s, ``Max``; scale-down window 300 s, 100 % per 15 s, ``Max``):
  stabilisation (scale-up: the lowest recommendation of its window, scale-down: the
  highest of its), then the rate policies over the scale events of their periods.

Times are seconds (floats) from any monotonic origin the caller chooses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TOLERANCE = 0.1
CPU_INITIALIZATION_PERIOD_S = 300.0
INITIAL_READINESS_DELAY_S = 30.0
DOWNSCALE_STABILIZATION_S = 300.0
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4


# ScalingLimited reasons and messages, as the controller writes them
_SCALE_UP_LIMIT = (
    "ScaleUpLimit",
    "the desired replica count is increasing faster than the maximum scale rate",
)
_TOO_MANY = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
_TOO_FEW = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")
_SCALE_DOWN_LIMIT = (
    "ScaleDownLimit",
    "the desired replica count is decreasing faster than the maximum scale rate",
)
_WITHIN_RANGE = ("DesiredWithinRange", "the desired count is within the acceptable range")


class MetricError(Exception):
    """A metric that cannot give a recommendation (the HPA's ScalingActive=False)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Pod:
    name: str
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    ready: bool | None  # the Ready condition's status (None: no condition)
    ready_changed_s: float | None  # its lastTransitionTime
    start_s: float | None  # status.startTime
    deleting: bool = False
    requests: Mapping[str, float] = field(default_factory=dict)  # resource -> amount


@dataclass(frozen=True)
class Sample:
    value: float  # cpu: cores; memory: bytes; custom: the metric's value
    timestamp_s: float
    window_s: float


def _group(
    pods: Sequence[Pod], metrics: Mapping[str, Sample], resource: str | None, now: float
) -> tuple[int, set[str], set[str]]:
    """ready count, ignored pods, missing pods (replica_calculator.go groupPods)."""
    ready = 0
    ignored: set[str] = set()
    missing: set[str] = set()
    for pod in pods:
        if pod.deleting or pod.phase == "Failed":
            continue  # gone: its metrics are dropped too (see _countable)
        if pod.phase == "Pending":
            ignored.add(pod.name)
            continue
        sample = metrics.get(pod.name)
        if sample is None:
            missing.add(pod.name)
            continue
        if resource == "cpu":
            if pod.ready is None or pod.start_s is None or pod.ready_changed_s is None:
                ignore = True
            elif pod.start_s + CPU_INITIALIZATION_PERIOD_S > now:
                ignore = (
                    not pod.ready
                ) or sample.timestamp_s < pod.ready_changed_s + sample.window_s
            else:
                ignore = (not pod.ready) and (
                    pod.start_s + INITIAL_READINESS_DELAY_S > pod.ready_changed_s
                )
            if ignore:
                ignored.add(pod.name)
                continue
        ready += 1
    return ready, ignored, missing


def _countable(
    pods: Sequence[Pod], metrics: Mapping[str, Sample], ignored: set[str]
) -> dict[str, float]:
    """The samples that enter the ratio: of pods that exist, are not being deleted, have
    not failed and are not ignored (the current controller removes the metrics of
    deleted and failed pods as well as of unready ones)."""
    alive = {p.name for p in pods if not (p.deleting or p.phase == "Failed")}
    return {n: s.value for n, s in metrics.items() if n in alive and n not in ignored}


def _final(
    current: int,
    ratio: float,
    new_ratio: float,
    counted: int,
    tolerance: float,
) -> int:
    if (
        abs(1.0 - new_ratio) <= tolerance
        or (ratio < 1.0 and new_ratio > 1.0)
        or (ratio > 1.0 and new_ratio < 1.0)
    ):
        return current
    proposal = math.ceil(new_ratio * counted)
    if (new_ratio < 1.0 and proposal > current) or (new_ratio > 1.0 and proposal < current):
        return current
    return proposal


def replicas_for_utilization(
    current: int,
    target_percent: float,
    resource: str,
    pods: Sequence[Pod],
    metrics: Mapping[str, Sample],
    now: float,
    tolerance: float = TOLERANCE,
) -> tuple[int, int, float]:
    """(replicas, utilisation %, raw average usage) for a Resource Utilization target."""
    if not pods:
        raise MetricError(
            "FailedGetResourceMetric",
            "no pods returned by selector while calculating replica count",
        )
    ready, ignored, missing = _group(pods, metrics, resource, now)
    usable = _countable(pods, metrics, ignored)
    requests: dict[str, float] = {}
    for pod in pods:
        if resource not in pod.requests:
            raise MetricError("FailedGetResourceMetric", f"missing request for {resource}")
        requests[pod.name] = pod.requests[resource]
    if not usable:
        raise MetricError("FailedGetResourceMetric", "did not receive metrics for any ready pods")

    def ratio_of(values: Mapping[str, float]) -> tuple[float, int, float]:
        total = sum(values.values())
        requested = sum(requests[n] for n in values)
        if requested <= 0:
            raise MetricError("FailedGetResourceMetric", f"no {resource} requests")
        utilization = int(total * 100 / requested)
        return utilization / target_percent, utilization, total / len(values)

    ratio, utilization, raw = ratio_of(usable)
    rebalance = bool(ignored) and ratio > 1.0
    if not rebalance and not missing:
        if abs(1.0 - ratio) <= tolerance:
            return current, utilization, raw
        return math.ceil(ratio * ready), utilization, raw
    filled = dict(usable)
    for name in missing:
        filled[name] = requests[name] if ratio < 1.0 else 0.0
    if rebalance:
        for name in ignored:
            filled[name] = 0.0
    new_ratio, _u, _r = ratio_of(filled)
    return _final(current, ratio, new_ratio, len(filled), tolerance), utilization, raw


def replicas_for_average_value(
    current: int,
    target: float,
    pods: Sequence[Pod],
    metrics: Mapping[str, Sample],
    now: float,
    resource: str | None = None,
    tolerance: float = TOLERANCE,
) -> tuple[int, float]:
    """(replicas, average value) for an AverageValue target (Resource or Pods metrics;
    calcPlainMetricReplicas)."""
    if not pods:
        raise MetricError(
            "FailedGetPodsMetric", "no pods returned by selector while calculating replica count"
        )
    ready, ignored, missing = _group(pods, metrics, resource, now)
    usable = _countable(pods, metrics, ignored)
    if not usable:
        raise MetricError("FailedGetPodsMetric", "did not receive metrics for any ready pods")
    ratio = sum(usable.values()) / len(usable) / target
    average = sum(usable.values()) / len(usable)
    rebalance = bool(ignored) and ratio > 1.0
    if not rebalance and not missing:
        if abs(1.0 - ratio) <= tolerance:
            return current, average
        return math.ceil(ratio * ready), average
    filled = dict(usable)
    for name in missing:
        filled[name] = target if ratio < 1.0 else 0.0
    if rebalance:
        for name in ignored:
            filled[name] = 0.0
    new_ratio = sum(filled.values()) / len(filled) / target
    return _final(current, ratio, new_ratio, len(filled), tolerance), average


# --------------------------------------------------------------------- behavior


@dataclass(frozen=True)
class Policy:
    type: str  # Pods | Percent
    value: int
    period_s: int


@dataclass(frozen=True)
class Rules:
    window_s: float
    select: str  # Max | Min | Disabled
    policies: tuple[Policy, ...]


DEFAULT_SCALE_UP = Rules(0, "Max", (Policy("Percent", 100, 15), Policy("Pods", 4, 15)))
DEFAULT_SCALE_DOWN = Rules(DOWNSCALE_STABILIZATION_S, "Max", (Policy("Percent", 100, 15),))


def parse_rules(raw: Mapping[str, Any] | None, default: Rules) -> Rules:
    """``spec.behavior.scaleUp``/``scaleDown`` (camelCase, as the API serves it) with the
    API server's defaults for what is left out."""
    if raw is None:
        return default
    window = raw.get("stabilizationWindowSeconds")
    policies = raw.get("policies")
    return Rules(
        default.window_s if window is None else float(window),
        raw.get("selectPolicy") or "Max",
        default.policies
        if policies is None
        else tuple(Policy(p["type"], int(p["value"]), int(p["periodSeconds"])) for p in policies),
    )


@dataclass
class _Event:
    change: int
    at: float


@dataclass
class Normalizer:
    """The controller's memory of one HPA: recent recommendations and scale events."""

    recommendations: list[tuple[int, float]] = field(default_factory=list)
    up_events: list[_Event] = field(default_factory=list)
    down_events: list[_Event] = field(default_factory=list)

    def normalize(
        self,
        behavior: Mapping[str, Any] | None,
        current: int,
        proposal: int,
        min_replicas: int,
        max_replicas: int,
        now: float,
    ) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(desired, conditions) — conditions as (type, status, reason, message)."""
        if behavior is None:
            return self._legacy(current, proposal, min_replicas, max_replicas, now)
        up = parse_rules(behavior.get("scaleUp"), DEFAULT_SCALE_UP)
        down = parse_rules(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN)
        conditions = []
        stabilized, reason, message = self._stabilize(up, down, current, proposal, now)
        if stabilized != proposal:
            conditions.append(("AbleToScale", "True", reason, message))
        else:
            conditions.append(
                ("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size")
            )
        desired, reason, message = self._rate_limit(
            up, down, current, stabilized, min_replicas, max_replicas, now
        )
        limited = "False" if desired == stabilized else "True"
        conditions.append(("ScalingLimited", limited, reason, message))
        return desired, conditions

    def _legacy(
        self, current: int, proposal: int, min_replicas: int, max_replicas: int, now: float
    ) -> tuple[int, list[tuple[str, str, str, str]]]:
        best = proposal
        cutoff = now - DOWNSCALE_STABILIZATION_S
        old = None
        for i, (rec, at) in enumerate(self.recommendations):
            if at < cutoff:
                old = i
            elif rec > best:
                best = rec
        if old is not None:
            self.recommendations[old] = (proposal, now)
        else:
            self.recommendations.append((proposal, now))
        conditions = []
        if best != proposal:
            conditions.append(("AbleToScale", "True", "ScaleDownStabilized",
                               "recent recommendations were higher than current one, applying the highest recent recommendation"))  # fmt: skip
        else:
            conditions.append(
                ("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size")
            )
        limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
        if max_replicas > limit:
            top, reason, message = (limit, *_SCALE_UP_LIMIT)
        else:
            top, reason, message = (max_replicas, *_TOO_MANY)
        if best < min_replicas:
            desired, reason, message = (min_replicas, *_TOO_FEW)
        elif best > top:
            desired = top
        else:
            desired, reason, message = (best, *_WITHIN_RANGE)
        conditions.append(
            ("ScalingLimited", "False" if desired == best else "True", reason, message)
        )
        return desired, conditions

    def _stabilize(
        self, up: Rules, down: Rules, current: int, proposal: int, now: float
    ) -> tuple[int, str, str]:
        if proposal >= current:
            window, better = up.window_s, min
            reason = "ScaleUpStabilized"
            message = "recent recommendations were lower than current one, applying the lowest recent recommendation"
        else:
            window, better = down.window_s, max
            reason = "ScaleDownStabilized"
            message = "recent recommendations were higher than current one, applying the highest recent recommendation"
        longest = max(up.window_s, down.window_s)
        result = proposal
        old = None
        for i, (rec, at) in enumerate(self.recommendations):
            if at > now - window:
                result = better(rec, result)
            if at < now - longest:
                old = i
        if old is not None:
            self.recommendations[old] = (proposal, now)
        else:
            self.recommendations.append((proposal, now))
        return result, reason, message

    @staticmethod
    def _changes(events: list[_Event], period_s: int, now: float) -> int:
        return sum(e.change for e in events if e.at > now - period_s)

    def _rate_limit(
        self, up: Rules, down: Rules, current: int, desired: int, lo: int, hi: int, now: float
    ) -> tuple[int, str, str]:
        if desired > current:
            if up.select == "Disabled":
                limit = current
            else:
                pick = min if up.select == "Min" else max
                limit = None
                for policy in up.policies:
                    start = current - self._changes(self.up_events, policy.period_s, now)
                    if policy.type == "Pods":
                        proposed = start + policy.value
                    else:
                        proposed = math.ceil(start * (1 + policy.value / 100))
                    limit = proposed if limit is None else pick(limit, proposed)
                limit = current if limit is None else limit
            limit = max(limit, current)
            if hi > limit:
                top, reason, message = (limit, *_SCALE_UP_LIMIT)
            else:
                top, reason, message = (hi, *_TOO_MANY)
            if desired > top:
                return top, reason, message
        elif desired < current:
            if down.select == "Disabled":
                limit = current
            else:
                pick = max if down.select == "Min" else min
                limit = None
                for policy in down.policies:
                    start = current + self._changes(self.down_events, policy.period_s, now)
                    if policy.type == "Pods":
                        proposed = start - policy.value
                    else:
                        proposed = int(start * (1 - policy.value / 100))
                    limit = proposed if limit is None else pick(limit, proposed)
                limit = current if limit is None else limit
            limit = min(limit, current)
            if lo < limit:
                bottom, reason, message = (limit, *_SCALE_DOWN_LIMIT)
            else:
                bottom, reason, message = (lo, *_TOO_FEW)
            if desired < bottom:
                return bottom, reason, message
        return desired, *_WITHIN_RANGE

    def record_scale(
        self, behavior: Mapping[str, Any] | None, previous: int, new: int, now: float
    ) -> None:
        """Remember a rescale for the rate policies (only with ``behavior``, as the
        controller does). Events older than the longest period are reused."""
        if behavior is None or new == previous:
            return
        if new > previous:
            rules = parse_rules(behavior.get("scaleUp"), DEFAULT_SCALE_UP)
            events, change = self.up_events, new - previous
        else:
            rules = parse_rules(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN)
            events, change = self.down_events, previous - new
        longest = max((p.period_s for p in rules.policies), default=0)
        for i, event in enumerate(events):
            if event.at < now - longest:
                events[i] = _Event(change, now)
                return
        events.append(_Event(change, now))
