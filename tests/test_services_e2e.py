"""`timewarp simulate` with a service and the unmodified `hpa` sample (plus `default_like`
placing the pods): the HPA scales the Deployment through the scale subresource on what
metrics.k8s.io shows; two runs give byte-identical CSVs; the steady state is the closed
form's; the scale-down waits out the HPA's documented 300 s stabilisation window."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.traffic.model import closed_form_replicas

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "inputs" / "service_step"
SCHEDULERS = ("python -m sample_schedulers.default_like", "python -m sample_schedulers.hpa")
HIGH_FROM, HIGH_UNTIL, END = 120, 1020, 1500


def workload(tmp_path: Path) -> Path:
    doc = json.loads((EXAMPLE / "workload.json").read_text())
    doc["services"][0]["traffic"] = {
        "type": "step",
        "steps": [[0, 20], [HIGH_FROM, 200], [HIGH_UNTIL, 20]],
        "duration": END,
        "arrivals": "poisson",
    }
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(doc))
    return path


def simulate(out: Path, wl: Path, env, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "timewarp", "simulate", "-q", *extra]
    for command in SCHEDULERS:
        args += ["--scheduler", command]
    args += ["-p", str(EXAMPLE / "platform.xml"), "-w", str(wl), "-o", str(out)]
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def hpa_run(tmp_path_factory, subprocess_env):
    tmp = tmp_path_factory.mktemp("hpa")
    wl = workload(tmp)
    proc = simulate(tmp / "out", wl, subprocess_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp, wl


def rows(out: Path) -> list[dict[str, str]]:
    with open(out / "out_services.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_outputs_per_tick_and_the_figure(hpa_run) -> None:
    tmp, _wl = hpa_run
    out = tmp / "out"
    table = rows(out)
    assert list(table[0])[:10] == [
        "time", "service", "desired_replicas", "ready_replicas", "request_rate", "latency_p50",
        "latency_p95", "latency_p99", "failed_requests", "cpu_utilisation",
    ]  # fmt: skip
    assert [float(r["time"]) for r in table] == [15.0 * i for i in range(1, END // 15 + 1)]
    assert (out / "service_web.png").stat().st_size > 10_000
    manifest = json.loads((out / "manifest.json").read_text())
    web = manifest["figures"]["services"]["web"]
    assert web["requests"] > 0 and web["model"] == "exact"


def test_the_hpa_reaches_the_closed_form_and_waits_out_its_stabilisation(hpa_run) -> None:
    tmp, _wl = hpa_run
    table = rows(tmp / "out")
    desired = {float(r["time"]): int(r["desired_replicas"]) for r in table}
    # 200 req/s × 50 ms at a 50 % target of 1 cpu: ceil(200 × 0.05 / (0.5 × 1)) = 20 pods
    steady = closed_form_replicas(200, 0.05, 0.5, 1.0)
    assert steady == 20
    # with pods that take 10 s to start, the HPA overshoots while they start (the Ready
    # ones stay saturated), at most to maxReplicas, then — once its 300 s downscale
    # window has passed — settles within its tolerance above the closed form
    assert max(desired.values()) <= 30
    high = [n for t, n in desired.items() if HIGH_UNTIL - 150 <= t <= HIGH_UNTIL]
    assert all(steady <= n <= round(steady * 1.25) for n in high), high
    # after the load falls, the scale-down waits for the 300 s downscale stabilisation
    # window: no earlier than 300 s after the fall, and within one more sync + tick
    # the scale-down proper (a drift of a pod or two within the tolerance is not it)
    half = (steady + closed_form_replicas(20, 0.05, 0.5, 1.0)) / 2
    down = min(t for t, n in desired.items() if t > HIGH_UNTIL and n <= half)
    assert HIGH_UNTIL + 300 <= down <= HIGH_UNTIL + 300 + 45, down
    low = [n for t, n in desired.items() if t >= down + 30]
    want = closed_form_replicas(20, 0.05, 0.5, 1.0)  # 2
    assert all(want <= n <= want + 1 for n in low), low


def test_two_runs_give_identical_bytes(hpa_run, subprocess_env) -> None:
    tmp, wl = hpa_run
    proc = simulate(tmp / "again", wl, subprocess_env, "--no-plots")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("out_services.csv", "out_jobs.csv", "out_schedule.csv", "out_machine_states.csv"):
        assert (tmp / "out" / name).read_bytes() == (tmp / "again" / name).read_bytes(), name
