"""The embedded simulator's two ways to the broker agree: message objects over a
``local://`` link (what `timewarp simulate` uses) and JSON over ZeroMQ ``inproc://`` (the
wire path, as `--batsim` and `timewarp sim` speak it) give the same outputs and the same
message log on seeded scenarios."""

from __future__ import annotations

import io
import random

import pytest

from broker.drivers.inprocess import InProcessRun
from simulator import local_link
from simulator.outputs import jobs_rows


def scenario(seed: int) -> tuple[list[dict], dict]:
    """One-core jobs arriving in bursts (same-instant submissions included), three
    profiles of whole and fractional durations."""
    rng = random.Random(seed)
    profiles = {
        f"p{i}": {"type": "delay", "delay": delay, "cpu": "1", "scheduler": "default"}
        for i, delay in enumerate((1, 2.5, rng.choice((0.3, 7, 12.25))))
    }
    jobs, t = [], 0.0
    for i in range(rng.randint(8, 20)):
        t += rng.choice((0, 0, 0.5, 1, 3.25))
        jobs.append({"id": str(i), "subtime": t, "res": 1, "profile": f"p{i % 3}"})
    return jobs, profiles


def linked(tmp_path, name: str, endpoint: str, jobs: list[dict], profiles: dict):
    folder = tmp_path / name
    folder.mkdir()
    world = InProcessRun(folder, nodes=3, cores=2, endpoint=endpoint)
    log = io.StringIO()
    try:
        sim = world.run_linked(jobs, profiles, log)
        # SIMULATION_BEGINS names the workload's path: the one difference of the folders
        return jobs_rows(sim.job_records()), log.getvalue().replace(str(folder), "<run>")
    finally:
        world.close()


@pytest.mark.parametrize("seed", range(4))
def test_message_objects_and_json_over_zeromq_agree(tmp_path, seed):
    jobs, profiles = scenario(seed)
    wire_rows, wire_log = linked(tmp_path, "wire", f"inproc://link-{seed}", jobs, profiles)
    local_rows, local_log = linked(tmp_path, "local", f"local://link-{seed}", jobs, profiles)
    assert "EXECUTE_JOB" in wire_log and "SIMULATION_ENDS" in wire_log  # a whole run
    assert len(wire_rows) == len(jobs) + 1  # every job ended (and the header)
    assert local_log == wire_log
    assert local_rows == wire_rows


def test_a_local_endpoint_is_bound_once_and_freed_by_close(tmp_path):
    world = InProcessRun(tmp_path, endpoint="local://link-once")
    try:
        with pytest.raises(ValueError, match="already bound"):
            local_link.bind("local://link-once")
    finally:
        world.close()
    local_link.unbind(local_link.bind("local://link-once"))  # free again
    with pytest.raises(ValueError, match="nothing is bound at local://nobody"):
        local_link.connect("local://nobody")
