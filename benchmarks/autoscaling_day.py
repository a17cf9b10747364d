"""A simulated day of autoscaling: the 24-hour sinusoid (110 ± 90 requests/s, 50 ms
exponential cost, Poisson arrivals — 9.5 million requests) on examples/inputs/service_step's
cluster, with the unmodified `hpa` sample and `default_like`.

Reported: wall time, simulated/wall ratio, CPU by part — the scheduler processes
(default_like + hpa), the broker process less the traffic model, the traffic model (the
broker's driver thread inside it, ``thread_time``), the embedded simulator is a thread
of the broker process — and requests simulated per CPU second of the traffic model.

    .venv/bin/python benchmarks/autoscaling_day.py [--hours 24] [--model exact|fluid|auto]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments._common import REPO, load_average, run_simulate  # noqa: E402

EXAMPLE = REPO / "examples" / "inputs" / "service_step"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--model", choices=("exact", "fluid", "auto"), default="auto")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="timewarp-day-"))
    doc = json.loads((EXAMPLE / "workload.json").read_text())
    service = doc["services"][0]
    service["traffic"] = {
        "type": "sinusoid", "mean": 110, "amplitude": 90, "period": 86400, "phase": 64800,
        "duration": args.hours * 3600, "arrivals": "poisson",
    }  # fmt: skip
    service["model"] = args.model
    out.mkdir(parents=True, exist_ok=True)
    wl = out / "workload.json"
    wl.write_text(json.dumps(doc))
    run = run_simulate(
        ["python -m sample_schedulers.default_like", "python -m sample_schedulers.hpa"],
        EXAMPLE / "platform.xml",
        [wl],
        out,
    )
    if run.returncode != 0:
        print(run.stderr[-3000:], file=sys.stderr)
        return 1
    figures = run.figures
    web = figures["services"]["web"]
    traffic = figures["traffic_model_cpu_s"]
    cpu = run.cpu_s
    simulated = args.hours * 3600
    print(
        f"simulated {simulated:,.0f} s in {run.wall_s:.1f} s wall: {simulated / run.wall_s:,.0f}x"
    )
    print(
        f"CPU: schedulers {cpu.get('scheduler', 0):.1f} s, broker (less traffic model) "
        f"{cpu.get('broker', 0) - traffic:.1f} s, traffic model {traffic:.1f} s "
        f"(model {web['model']}); total {run.cpu_total_s:.1f} s"
    )
    print(
        f"requests: {web['requests']:,} ({web['failed']:,} failed); "
        f"{web['requests'] / traffic:,.0f} per CPU second of the traffic model"
    )
    print(f"machine load after: {load_average()}; outputs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
