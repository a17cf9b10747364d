"""asyncio programs are first-class (issue 19, class 1): an aiohttp/kubernetes_asyncio
scheduler and a kopf operator run unmodified through `timewarp simulate` — kubeconfig
over HTTP, in-cluster configuration over HTTPS (TLS done by asyncio's SSLProtocol over
memory buffers) — twice each with byte-identical outputs and the expected placements.
Their loops' waits on the API count as API reads (the broker never declares quiescence
while data is on its way to a loop), and requests a loop has in flight together are
handled in the order it sent them (kopf's per-pod daemons delete in the same order every
run)."""

from __future__ import annotations

import csv
import json
import re

import pytest
from simrun import delay_profiles, one_core_jobs, placements, run_twice, write_inputs

from simulator.testing import write_platform, write_workload

AIO = "python tests/programs/aio_binder.py"
JOBS = one_core_jobs((0, "short"), (0, "short"), (5, "long"), (5, "short"))
PROFILES = delay_profiles(short=10, long=100)
# two single-core nodes, the most free cpu first (ties by name): 1 and 2 at once, 3 and 4
# when they end (in creation order, then name)
EXPECTED = {
    "1": ("0", "0.000000", "10.000000"),
    "2": ("1", "0.000000", "10.000000"),
    "3": ("0", "10.000000", "110.000000"),
    "4": ("1", "10.000000", "20.000000"),
}


@pytest.fixture
def inputs(tmp_path):
    return write_inputs(tmp_path, JOBS, PROFILES)


def test_kubernetes_asyncio_binder_with_kubeconfig(tmp_path, subprocess_env, inputs):
    """With a /metrics endpoint on its loop (aiohttp ``web.AppRunner``/``TCPSite``): the
    loop waits on the listening socket idle, nothing to report (timewarp/_core/servers.py)."""
    platform, workload = inputs
    out, r = run_twice(tmp_path, subprocess_env, AIO + " --metrics", platform, workload)
    assert placements(out) == EXPECTED
    # -q: a good run prints nothing but warnings (none here); its figures are in the manifest
    figures = json.loads((out / "manifest.json").read_text())["figures"]
    assert figures["nondeterministic_advances"] == 0 and "stall guard" not in r.stderr
    log = (out / "scheduler-0.log").read_text()
    assert "2026-01-01 00:00:10,000 bound w0.3 to n000" in log


def test_kubernetes_asyncio_binder_in_cluster_over_tls(tmp_path, subprocess_env, inputs):
    """`load_incluster_config()` of kubernetes_asyncio finds the broker's service-account
    files, and aiohttp's TLS (asyncio's SSLProtocol) is counted in plaintext."""
    platform, workload = inputs
    out, r = run_twice(
        tmp_path, subprocess_env, AIO + " --incluster", platform, workload, "--incluster"
    )
    assert placements(out) == EXPECTED
    assert "stall guard" not in r.stderr


def test_kopf_operator_schedules_expires_and_reports_in_virtual_time(tmp_path, subprocess_env):
    """Six pods at once on three two-core nodes; each pod's daemon sleeps 30 s and deletes
    it — six deletes in flight together, in one order every run; the node timers tick
    every 10 simulated seconds. kopf serves its liveness endpoint meanwhile (nothing
    probes it): no stall, no non-deterministic advance."""
    platform = write_platform(tmp_path / "p.xml", 3, 2)
    jobs = [{"id": str(i), "subtime": 0, "res": 1, "profile": "j"} for i in range(1, 7)]
    profiles = {"j": {"type": "delay", "delay": 100, "cpu": "1", "scheduler": "default"}}
    workload = write_workload(tmp_path / "w.json", jobs, profiles)
    out, r = run_twice(
        tmp_path, subprocess_env,
        "kopf run --standalone --all-namespaces --liveness=http://127.0.0.1:0/healthz "
        "tests/programs/kopf_operator.py",
        platform, workload,
    )  # fmt: skip
    figures = json.loads((out / "manifest.json").read_text())["figures"]
    assert figures["nondeterministic_advances"] == 0 and "stall guard" not in r.stderr
    with open(out / "out_jobs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {row["final_state"] for row in rows} == {"COMPLETED_KILLED"}
    assert {(row["starting_time"], row["finish_time"]) for row in rows} == {
        ("0.000000", "30.000000")
    }
    # least loaded, one at a time: two pods per node
    assert sorted(row["allocated_resources"] for row in rows) == ["0", "0", "1", "1", "2", "2"]
    log = (out / "scheduler-0.log").read_text()
    expired = re.findall(r"\[default/(w0\.\d+)\] expiring", log)
    assert len(expired) == 6
    # the deletes were handled in the order the daemons sent them
    assert [row["job_id"] for row in rows] == [name[len("w0.") :] for name in expired]
    ticks = re.findall(r"^\[2026-01-01 (\S+)\] .*pods running on n000", log, re.M)
    assert ticks[:3] == ["00:00:00,000", "00:00:10,000", "00:00:20,000"]
