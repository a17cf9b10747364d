"""Other Kubernetes client libraries run unmodified too (docs/compatibility.md):
lightkube (synchronous httpx: a thread's blocking sockets) and kr8s (asyncio httpx, with
anyio's worker threads, virtualised like concurrent.futures'), twice each through
`timewarp simulate`, byte-identical, with the expected placements."""

from __future__ import annotations

import pytest
from simrun import placements, run_twice

from simulator.testing import write_platform, write_workload

JOBS = [
    {"id": "1", "subtime": 0, "res": 1, "profile": "short"},
    {"id": "2", "subtime": 0, "res": 1, "profile": "short"},
    {"id": "3", "subtime": 5, "res": 1, "profile": "long"},
]
PROFILES = {
    "short": {"type": "delay", "delay": 10, "cpu": "1", "scheduler": "default"},
    "long": {"type": "delay", "delay": 100, "cpu": "1", "scheduler": "default"},
}
# fewest running pods, ties by name, on two two-core nodes
EXPECTED = {
    "1": ("0", "0.000000", "10.000000"),
    "2": ("1", "0.000000", "10.000000"),
    "3": ("0", "5.000000", "105.000000"),
}


@pytest.mark.parametrize(
    ("library", "program"),
    [("lightkube", "lightkube_binder.py"), ("kr8s", "kr8s_binder.py")],
)
def test_a_scheduler_on_another_client_library(tmp_path, subprocess_env, library, program):
    platform = write_platform(tmp_path / "p.xml", 2, 2)
    workload = write_workload(tmp_path / "w.json", JOBS, PROFILES)
    out, r = run_twice(
        tmp_path, subprocess_env, f"python tests/programs/{program}", platform, workload
    )
    assert placements(out) == EXPECTED
    assert "stall guard" not in r.stderr
    log = (out / "scheduler-0.log").read_text()
    assert "2026-01-01 00:00:05,000 bound w0-213 to n000" in log
