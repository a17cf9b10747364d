"""API versions clients still call (issue 26, item 3), end to end: a night-time
downscaler on autoscaling/v1 HPAs (the official client's AutoscalingV1Api, a loop with
time.sleep) and a pod watcher over WebSocket (websocket-client, the bearer token), both
written as their authors write them, run unmodified under `timewarp simulate
--incluster` beside the sample HPA controller, twice (`--check-determinism`)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from simrun import ROOT, run_simulate

EXAMPLE = ROOT / "examples" / "inputs" / "service_step"
DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default-scheduler"


def _service_with_day_minimum(tmp_path: Path) -> Path:
    """The step service (20 rps, 200 from t=600 s, 20 from t=1800 s) whose HPA keeps at
    least 4 replicas: what the downscaler lowers at night."""
    workload = json.loads((EXAMPLE / "workload.json").read_text())
    (service,) = workload["services"]
    service["horizontalPodAutoscaler"]["spec"]["minReplicas"] = 4
    # past 3600 s: the server ends a watch after 30-60 virtual minutes (seeded), so the
    # watcher's re-watch comes whatever the draw
    service["traffic"]["duration"] = 3900
    path = tmp_path / "web.json"
    path.write_text(json.dumps(workload))
    return path


def test_a_v1_downscaler_and_a_websocket_watcher_run_unmodified_and_reproducibly(
    tmp_path, subprocess_env
):
    """Virtual 0 is 21:30 UTC: at 22:00 (t=1800 s, when the load drops) the downscaler
    lowers the HPA's minimum from 4 to 1 through autoscaling/v1, writing the object back
    whole; the HPA controller (reading v2) then scales below 4, which the day's minimum
    forbade. The WebSocket watcher logs every pod event and watches again when the
    server ends its watch (after 30-60 virtual minutes)."""
    # requests-style CA overrides would also override websocket-client's: a pod has none
    env = {k: v for k, v in subprocess_env.items() if not k.endswith("CA_BUNDLE")}
    out = tmp_path / "out"
    r = run_simulate(
        out, env, DEFAULT_LIKE, EXAMPLE / "platform.xml", _service_with_day_minimum(tmp_path),
        "--incluster", "--check-determinism", "--epoch", "2026-01-01T21:30:00Z",
        "--scheduler", "python -m sample_schedulers.hpa",
        "--scheduler", "python tests/programs/hpa_night_downscaler.py",
        "--scheduler", "python tests/programs/ws_pod_watcher.py default",
        timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    assert "the two runs wrote the same bytes" in r.stderr
    assert (out / "scheduler-2.log").read_text().splitlines() == [
        "22:00 default/web: minReplicas 1"
    ]
    with open(out / "out_services.csv", newline="") as handle:
        rows = [
            (float(row["time"]), int(row["desired_replicas"])) for row in csv.DictReader(handle)
        ]
    assert min(n for t, n in rows if t < 1800) == 4  # the day's minimum held
    assert rows[-1][1] < 4  # the night's minimum is really lower: the HPA went below 4
    hpa_log = (out / "scheduler-1.log").read_text()
    assert "New size: 3" in hpa_log
    watcher = (out / "scheduler-3.log").read_text().splitlines()
    assert watcher[0].startswith("t=0s ADDED web-") and watcher[0].endswith(" Pending")
    assert any(" MODIFIED web-" in line and " Running node" in line for line in watcher)
    assert any(" DELETED web-" in line for line in watcher)  # the scale-downs
    assert any(line.endswith("watch ended, watching again") for line in watcher)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["figures"]["nondeterministic_advances"] == 0
