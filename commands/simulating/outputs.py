"""The names of a run's output files (``commands/simulate.py`` and ``commands/broker.py``)."""

from __future__ import annotations

import shlex
from pathlib import Path

OUT_PREFIX = "out"
OUT_FILES = tuple(f"{OUT_PREFIX}_{kind}.csv" for kind in ("jobs", "schedule", "machine_states"))
DECISIONS_CSV = f"{OUT_PREFIX}_decisions.csv"  # broker/cluster/decisions.py
RUNNING_CSV = f"{OUT_PREFIX}_running.csv"  # a partial run's jobs still running at the stop
PLOT_FILES = ("gantt.png", "utilisation.png")
OBSERVER_KUBECONFIG = "observer.kubeconfig"  # the people's: kubectl, read-only (docs/security.md)


def kubectl_line(observer_kubeconfig: Path) -> str:
    """What to type to look inside a run (printed as it starts, in the summary, in the
    manifest's ``figures.kubectl``)."""
    return f"KUBECONFIG={shlex.quote(str(observer_kubeconfig))} kubectl get pods"
