"""Skenario-style autoscaling scenarios, the `hpa` and `kpa` samples in simulated time.

    .venv/bin/python experiments/autoscaling.py [--scenario step ...] [--autoscaler hpa ...]
        [--sinusoid-hours 24] [-o experiments/out/autoscaling]

Scenarios (on examples/inputs/service_step's cluster and Deployment: 1-cpu pods, 50 ms
exponential cost, 10 s timeout, Poisson arrivals):

- ``step``: 20/s, ×10 to 200/s at 300 s, back to 20/s at 1500 s, until 2400 s;
- ``ramp``: 20/s, rising linearly to 200/s from 300 s to 900 s, held until 1800 s;
- ``sinusoid``: a daily cycle, 110 ± 90 /s over ``--sinusoid-hours`` (24);
- ``flash``: 20/s with a flash crowd of 400/s from 600 s to 660 s, until 1500 s.

Autoscalers: ``hpa`` (the workload's HPA: 50 % cpu, 1..30 replicas) and ``kpa``
(Knative annotations: 1 request in flight per pod at 100 % — about 50 % cpu under
processor sharing — max-scale 30; Skenario's 10 s metrics tick + 4 s lag, since
Skenario was built for it).

Per run, from ``out_services.csv``, against the pods needed at each tick,
``need = ceil(rate × cost / (0.5 × 1 cpu))`` (the closed form of a 50 % target):

- **time to scale**: the longest stretch with Ready pods below ``need`` (s);
- **over-provisioned replica-seconds**: Σ max(0, Ready − need) × tick;
- **requests failed** (and the share of all requests).

Also checked: the HPA's steady state at 200/s against the closed form (20 pods) — from
the end of the 300 s downscale stabilisation window after its last scale-up, since an
overshoot on the way up is held that long — and its
scale-down delay after the step down (the first tick with at most half-way between the
high and the low closed forms, 11 pods) against the documented 300 s stabilisation
window; on the sinusoid, the share of ticks whose Ready pods are a count the HPA keeps at
that rate — usage/target within the 0.1 tolerance, ``rate × cost / (1.1 × 0.5 × 1 cpu)``
to ``rate × cost / (0.9 × 0.5 × 1 cpu)``, rounded outward — and the range of Ready − need.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments._common import REPO, finish, run_simulate  # noqa: E402

EXAMPLE = REPO / "examples" / "inputs" / "service_step"
DEFAULT_LIKE = "python -m sample_schedulers.default_like"
AUTOSCALERS = {"hpa": "python -m sample_schedulers.hpa", "kpa": "python -m sample_schedulers.kpa"}
COST, TARGET, LIMIT = 0.05, 0.5, 1.0
TOLERANCE = 0.1  # kube-controller-manager's --horizontal-pod-autoscaler-tolerance
DOWNSCALE_WINDOW_S = 300.0  # its --horizontal-pod-autoscaler-downscale-stabilization
TICK_S = 15.0  # the metrics tick and the HPA's sync period
KPA_ANNOTATIONS = {
    "autoscaling.knative.dev/class": "kpa.autoscaling.knative.dev",
    "autoscaling.knative.dev/target": "1",
    "autoscaling.knative.dev/target-utilization-percentage": "100",
    "autoscaling.knative.dev/max-scale": "30",
}


def traffic(scenario: str, hours: float) -> dict:
    if scenario == "step":
        return {"type": "step", "steps": [[0, 20], [300, 200], [1500, 20]], "duration": 2400}
    if scenario == "ramp":
        return {"type": "ramp", "from": 20, "to": 200, "start": 300, "ramp_duration": 600,
                "duration": 1800}  # fmt: skip
    if scenario == "sinusoid":
        return {"type": "sinusoid", "mean": 110, "amplitude": 90, "period": 86400,
                "phase": 64800, "duration": hours * 3600}  # fmt: skip
    return {"type": "step", "steps": [[0, 20], [600, 400], [660, 20]], "duration": 1500}


def workload(scenario: str, autoscaler: str, hours: float, path: Path) -> Path:
    doc = json.loads((EXAMPLE / "workload.json").read_text())
    service = doc["services"][0]
    service["traffic"] = {**traffic(scenario, hours), "arrivals": "poisson"}
    if autoscaler == "kpa":
        del service["horizontalPodAutoscaler"]
        service["deployment"]["metadata"]["annotations"] = dict(KPA_ANNOTATIONS)
        service["metrics"] = {"pipeline": "skenario"}
    path.write_text(json.dumps(doc, indent=1))
    return path


def need(rate: float) -> int:
    return max(1, math.ceil(rate * COST / (TARGET * LIMIT) - 1e-9))


def within_tolerance(rate: float, ready: int, tolerance: float = TOLERANCE) -> bool:
    """Whether ``ready`` pods are a count the HPA keeps at ``rate``: usage/target within
    ``tolerance`` of 1 (the band's ends rounded outward to whole pods)."""
    work = rate * COST / (TARGET * LIMIT)
    return (
        math.floor(work / (1 + tolerance) + 1e-9)
        <= ready
        <= math.ceil(work / (1 - tolerance) - 1e-9)
    )


def figures(rows: list[dict[str, str]], scenario: str) -> dict:
    longest = current = 0.0
    over = 0.0
    failed = total = 0
    prev_t = 0.0
    for row in rows:
        t = float(row["time"])
        tick = t - prev_t
        prev_t = t
        ready = int(row["ready_replicas"])
        rate = float(row["request_rate"])
        wanted = need(rate)
        if ready < wanted:
            current += tick
            longest = max(longest, current)
        else:
            current = 0.0
        over += max(0, ready - wanted) * tick
        failed += int(row["failed_requests"])
        total += round(rate * tick)
    out = {
        "time_to_scale_s": round(longest, 1),
        "overprovisioned_replica_s": round(over),
        "failed": failed,
        "failed_share": failed / total if total else 0.0,
    }
    if scenario == "sinusoid":
        # a slow cycle is a succession of steady states: the HPA leaves a replica count
        # alone while usage/target is within its 0.1 tolerance, so Ready should stay in
        # the band [rate × cost / (1.1 × target × limit), rate × cost / (0.9 × ...)]
        inside = [within_tolerance(float(r["request_rate"]), int(r["ready_replicas"]))
                  for r in rows]  # fmt: skip
        out["in_band_share"] = sum(inside) / len(inside) if inside else 0.0
        offsets = [int(r["ready_replicas"]) - need(float(r["request_rate"])) for r in rows]
        out["ready_minus_need"] = [min(offsets), max(offsets)] if offsets else []
    if scenario == "step":
        desired = [(float(r["time"]), int(r["desired_replicas"])) for r in rows]
        # the steady state: once the downscale stabilisation window has passed since
        # the high phase's last scale-up (plus a metrics tick and a sync to act on it).
        # An overshoot on the way up — the first pods saturated while new ones start —
        # is the window's highest recommendation and is held that long, by design; a
        # fixed "from 600 s" counted it as the steady state
        ups = [
            t
            for (_, n0), (t, n) in zip(desired, desired[1:], strict=False)
            if 300 < t <= 1500 and n > n0
        ]
        settled = (max(ups) if ups else 300.0) + DOWNSCALE_WINDOW_S + 2 * TICK_S
        high = [n for t, n in desired if settled <= t <= 1500]
        out["steady_high"] = sorted(set(high))
        # the scale-down proper: below half-way between the high and the low closed forms
        # (a drift of a pod or two within the tolerance is not it)
        half = (need(200) + need(20)) / 2
        down = min((t for t, n in desired if t > 1500 and n <= half), default=None)
        out["scale_down_after_s"] = None if down is None else down - 1500
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenario", action="append", choices=("step", "ramp", "sinusoid", "flash")
    )
    parser.add_argument("--autoscaler", action="append", choices=sorted(AUTOSCALERS))
    parser.add_argument("--sinusoid-hours", type=float, default=24.0)
    parser.add_argument(
        "-o", "--output", type=Path, default=REPO / "experiments" / "out" / "autoscaling"
    )
    parser.add_argument("--timeout", type=float, default=7200.0, help="per run, wall seconds")
    args = parser.parse_args(argv)
    record, table = [], []
    for scenario in args.scenario or ["step", "ramp", "flash", "sinusoid"]:
        for autoscaler in args.autoscaler or ["hpa", "kpa"]:
            out = args.output / f"{scenario}-{autoscaler}"
            out.mkdir(parents=True, exist_ok=True)
            wl = workload(scenario, autoscaler, args.sinusoid_hours, out / "workload.json")
            run = run_simulate(
                [DEFAULT_LIKE, AUTOSCALERS[autoscaler]], EXAMPLE / "platform.xml", [wl], out,
                timeout_s=args.timeout,
            )  # fmt: skip
            ok = run.returncode == 0 and (out / "out_services.csv").exists()
            fig = {}
            if ok:
                with open(out / "out_services.csv", newline="") as handle:
                    fig = figures(list(csv.DictReader(handle)), scenario)
            record.append({"scenario": scenario, "autoscaler": autoscaler, "ok": ok,
                           "wall_s": round(run.wall_s, 1), **fig,
                           **({} if ok else {"stderr": run.stderr[-2000:]})})  # fmt: skip
            table.append([
                scenario, autoscaler, fig.get("time_to_scale_s", "-"),
                fig.get("overprovisioned_replica_s", "-"),
                f"{fig['failed']} ({fig['failed_share']:.2%})" if fig else "-",
                fig.get("steady_high", ""), fig.get("scale_down_after_s", ""),
                f"{fig['in_band_share']:.1%}" if "in_band_share" in fig else "",
                f"{run.wall_s:.0f}",
            ])  # fmt: skip
            print(
                f"{scenario}/{autoscaler}: {'ok' if ok else 'FAILED'} in {run.wall_s:.0f} s",
                file=sys.stderr,
            )
    headers = ["scenario", "autoscaler", "time to scale (s)", "over-provisioned replica-s",
               "requests failed", "steady pods at 200/s", "scale-down after fall (s)",
               "ticks in the tolerance band", "wall (s)"]  # fmt: skip
    return finish(args.output, record, headers, table)


if __name__ == "__main__":
    sys.exit(main())
