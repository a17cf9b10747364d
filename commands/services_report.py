"""``out_services.csv`` and one figure per service (``service_<name>.png``).

One CSV row per service and metrics tick (the columns of
:data:`simulator.traffic.metrics.ROW_FIELDS`; times in simulated seconds since the start,
latencies in seconds, empty when no request completed in the tick). Written to a
temporary file and renamed, so a reader never sees half of it.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from commands.timeaxis import time_unit
from simulator.traffic.metrics import ROW_FIELDS

if TYPE_CHECKING:
    from simulator.traffic.model import TickRow

SERVICES_CSV = "out_services.csv"


def write_rows(path: Path, rows: Sequence[TickRow]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(ROW_FIELDS)
    for row in sorted(rows, key=lambda r: (r.time, r.service)):
        writer.writerow(row.csv_values())
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(buffer.getvalue())
    os.replace(tmp, path)


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def plot_services(
    csv_path: Path, out_dir: Path, timeouts: dict[str, float] | None = None
) -> list[Path]:
    """One PNG per service: traffic (requests/s, failed/s), replicas (desired, ready)
    with CPU utilisation, and latency percentiles, against simulated time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_rows(csv_path)
    by_service: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_service.setdefault(row["service"], []).append(row)
    written = []
    for name, srows in sorted(by_service.items()):

        def col(key: str, rows=srows) -> list[float]:
            return [float(r[key]) if r[key] != "" else float("nan") for r in rows]

        t = col("time")
        scale, unit = time_unit(t[-1]) if t else (1.0, "s")
        if unit == "s" and t[-1] > 1800:  # half an hour to two: minutes
            scale, unit = 60.0, "min"
        x = [v / scale for v in t]
        widths = [b - a for a, b in zip([0.0, *t[:-1]], t, strict=True)]
        failed_rate = [
            f / w if w > 0 else 0.0 for f, w in zip(col("failed_requests"), widths, strict=True)
        ]
        fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(10, 8.5), sharex=True)
        fig.suptitle(f"service {name}: traffic, replicas and latency over simulated time")
        ax1.plot(x, col("request_rate"), color="tab:blue", label="requests arriving (per s)")
        ax1.plot(x, failed_rate, color="tab:red", label="requests failed (per s)")
        ax1.set_ylabel("requests / s")
        ax1.legend(loc="upper right")
        ax1.grid(alpha=0.3)
        ax2.step(x, col("desired_replicas"), where="post", color="tab:gray", linestyle="--",
                 label="desired replicas (Deployment spec)")  # fmt: skip
        ax2.step(x, col("ready_replicas"), where="post", color="tab:green", label="Ready replicas")
        ax2.set_ylabel("replicas")
        ax2.grid(alpha=0.3)
        util = ax2.twinx()
        util.plot(x, [u * 100 for u in col("cpu_utilisation")], color="tab:orange", alpha=0.6,
                  linewidth=0.8, label="CPU utilisation (% of request)")  # fmt: skip
        util.set_ylabel("CPU % of request", color="tab:orange")
        lines = ax2.get_legend_handles_labels()
        more = util.get_legend_handles_labels()
        ax2.legend(lines[0] + more[0], lines[1] + more[1], loc="upper right")
        for key, style in (("latency_p50", ":"), ("latency_p95", "--"), ("latency_p99", "-")):
            ax3.plot(
                x, col(key), linestyle=style, color="tab:purple", label=key.replace("latency_", "")
            )
        timeout = (timeouts or {}).get(name)
        if timeout:
            ax3.axhline(timeout, color="tab:red", linewidth=0.8, label=f"timeout ({timeout:g} s)")
        ax3.set_yscale("log")
        ax3.set_ylabel("latency of completed requests (s)")
        ax3.set_xlabel(f"simulated time ({unit})")
        ax3.legend(loc="upper right")
        ax3.grid(alpha=0.3, which="both")
        fig.tight_layout()
        path = out_dir / f"service_{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
