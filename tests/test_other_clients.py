"""Other Kubernetes client libraries run unmodified too (docs/compatibility.md):
lightkube (synchronous httpx: a thread's blocking sockets) and kr8s (asyncio httpx, with
anyio's worker threads, virtualised like concurrent.futures'), twice each through
`timewarp simulate`, byte-identical, with the expected placements."""

from __future__ import annotations

import pytest
from simrun import delay_profiles, one_core_jobs, placements, run_twice, write_inputs

JOBS = one_core_jobs((0, "short"), (0, "short"), (5, "long"))
PROFILES = delay_profiles(short=10, long=100)
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
    platform, workload = write_inputs(tmp_path, JOBS, PROFILES, cores=2)
    out, r = run_twice(
        tmp_path, subprocess_env, f"python tests/programs/{program}", platform, workload
    )
    assert placements(out) == EXPECTED
    assert "stall guard" not in r.stderr
    log = (out / "scheduler-0.log").read_text()
    assert "2026-01-01 00:00:05,000 bound w0.3 to n000" in log
