"""Node imbalance: the mean absolute error of node loads against their mean (Eq. 5.1).

``MAE = (1/D) * sum |x_i - y_i|`` with ``x_i`` a node's load and ``y_i`` the mean load
of the D nodes: 0 when perfectly balanced. The paper's published scripts computed the
spread ``max - min`` instead; :func:`spread` gives it too, and the CSV records both.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Mapping
from pathlib import Path


def mae(loads: Mapping[str, float]) -> float:
    """Mean absolute deviation of the loads from their mean (0.0 for no nodes)."""
    if not loads:
        return 0.0
    mean = sum(loads.values()) / len(loads)
    return sum(abs(x - mean) for x in loads.values()) / len(loads)


def spread(loads: Mapping[str, float]) -> float:
    """Heaviest minus lightest node load (0.0 for no nodes)."""
    return max(loads.values()) - min(loads.values()) if loads else 0.0


FIELDS = [
    "timestamp",
    "round",
    "algorithm",
    "metric",
    "nodes",
    "mean_load",
    "mae",
    "spread",
    "planned_mae",
    "planned_moves",
    "evictions",
    "node_loads",
]


class ImbalanceLog:
    """Appends one CSV row per rebalancing round; the header is written once, rows flushed.

    Each row holds the imbalance measured before acting (``mae``, ``spread``) and the one
    the plan predicts (``planned_mae``), so the file shows imbalance over time.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists() or path.stat().st_size == 0
        self._file = path.open("a", newline="")
        self._writer = csv.DictWriter(self._file, FIELDS)
        if new:
            self._writer.writeheader()
            self._file.flush()

    def write(
        self,
        round_no: int,
        algorithm: str,
        metric: str,
        loads: Mapping[str, float],
        planned: Mapping[str, float],
        planned_moves: int,
        evictions: int,
        timestamp: float | None = None,
    ) -> None:
        self._writer.writerow(
            {
                "timestamp": f"{time.time() if timestamp is None else timestamp:.3f}",
                "round": round_no,
                "algorithm": algorithm,
                "metric": metric,
                "nodes": len(loads),
                "mean_load": f"{sum(loads.values()) / len(loads) if loads else 0.0:.3f}",
                "mae": f"{mae(loads):.3f}",
                "spread": f"{spread(loads):.3f}",
                "planned_mae": f"{mae(planned):.3f}",
                "planned_moves": planned_moves,
                "evictions": evictions,
                "node_loads": ";".join(f"{n}={v:.3f}" for n, v in sorted(loads.items())),
            }
        )
        self._file.flush()

    def close(self) -> None:
        self._file.close()
