"""The KCSS decision: filter like kube-scheduler, then TOPSIS over the feasible nodes."""

from __future__ import annotations

import heapq

from sample_schedulers.common.feasibility import feasible_nodes
from sample_schedulers.common.loop import Decision
from sample_schedulers.common.model import NodeView, PodSummary
from sample_schedulers.common.queue import natural_key

from .criteria import CRITERIA, KcssConfig, image_size, node_criteria
from .topsis import relative_closeness


def decide(pod: PodSummary, views: list[NodeView], config: KcssConfig) -> Decision:
    """The feasible node with the highest relative closeness; ties to the smallest name
    (natural order). A pure function of its arguments."""
    fits, why_not = feasible_nodes(pod, views)
    if not fits:
        return Decision(None, why_not)
    problems: list[str] = []
    try:
        pull = image_size(pod, views, config)
    except ValueError as exc:
        problems.append(f"pod {pod.key}: {exc}; using the default image size")
        pull = config.default_image_size * len(pod.images)
    matrix = [node_criteria(pod, v, pull, config, problems) for v in fits]
    rc = relative_closeness(matrix, config.weights, config.benefit)
    top = max(rc)
    best = min(
        (i for i in range(len(fits)) if rc[i] == top),
        key=lambda i: (natural_key(fits[i].name), fits[i].name),
    )
    runners_up = heapq.nsmallest(2, ((-rc[i], fits[i].name) for i in range(len(fits)) if i != best))
    shown = ", ".join(
        [f"{fits[best].name}={top:.4f}"] + [f"{name}={-neg:.4f}" for neg, name in runners_up]
    )
    values = ", ".join(_show(c, x) for c, x in zip(CRITERIA, matrix[best], strict=True))
    detail = f"[RC {shown}; chosen {values}]"
    if problems:
        more = f"; and {len(problems) - 3} more" if len(problems) > 3 else ""
        detail += " problems: " + "; ".join(problems[:3]) + more
    return Decision(fits[best].name, detail=detail)


def _show(criterion: str, value: float) -> str:
    if criterion == "cpu":
        return f"cpu={value:g}m"
    if criterion in ("memory", "disk"):
        return f"{criterion}={value / 2**30:.3g}Gi"
    if criterion == "image":
        return f"image={value:.3g}s"
    if criterion == "power":
        return f"power={value:g}W"
    return f"{criterion}={value:g}"
