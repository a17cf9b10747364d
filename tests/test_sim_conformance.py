"""Conformance with real Batsim 4.2.1: its reference CSVs reproduced through `timewarp sim`,
and the outputs loaded by evalys."""

from __future__ import annotations

import csv
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from simulator.engine import drive
from simulator.fcfs import Fcfs, serve
from simulator.outputs import JOBS_HEADER
from simulator.testing import free_endpoint, make_sim, shared_data_dir

CASES = {
    # reference dir: (platform, workload, makespan)
    "200_delay170": ("platform_graphene_16nodes_fixed.xml", "200_delay170.json", 2210.0),
    "spaced_200_delay170": (
        "platform_graphene_16nodes_fixed.xml",
        "spaced_200_delay170.json",
        2280.0,
    ),
    "KIT_10h_80": ("1node_6core_fixed.xml", "KIT_10h_80.json", 32554.0),
}
TIME_COLUMNS = (
    "submission_time",
    "starting_time",
    "execution_time",
    "finish_time",
    "waiting_time",
    "turnaround_time",
)


@pytest.fixture
def data() -> Path:
    path = shared_data_dir()
    if path is None:
        pytest.skip("shared/data is not beside this checkout")
    return path


def _inputs(data: Path, case: str) -> tuple[Path, Path]:
    platform, workload, _ = CASES[case]
    return (
        data / "batsim-reference/platforms" / platform,
        data / "batkube/workloads" / workload,
    )


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def assert_jobs_match(ours: Path, reference: Path) -> None:
    mine, theirs = _rows(ours), _rows(reference)
    assert [r["job_id"] for r in mine] == [r["job_id"] for r in theirs]  # same row order
    for a, b in zip(mine, theirs, strict=True):
        for key in b:
            if key in TIME_COLUMNS:
                assert abs(float(a[key]) - float(b[key])) < 1e-3, (a["job_id"], key)
            elif key != "stretch":
                assert a[key] == b[key], (a["job_id"], key)


def assert_machine_states_match(ours: Path, reference: Path) -> None:
    """Same number of rows and, at each instant (µs offsets aside), the same final counts;
    the interleaving of rows within one instant depends on Batsim's message batching."""

    def by_instant(path):
        states: dict[float, tuple[str, ...]] = {}
        rows = _rows(path)
        for row in rows:
            instant = round(float(row["time"]), 3)
            states[instant] = tuple(v for k, v in row.items() if k != "time")
        return len(rows), states

    assert by_instant(ours) == by_instant(reference)


def assert_schedule_matches(ours: Path, reference: Path, makespan: float) -> None:
    mine, theirs = _rows(ours)[0], _rows(reference)[0]
    assert list(mine) == list(theirs)
    assert float(mine["makespan"]) == makespan
    for key, value in theirs.items():
        if key in ("batsim_version", "scheduling_time", "simulation_time"):
            continue
        assert abs(float(mine[key]) - float(value)) < 1e-3, key


@pytest.mark.parametrize("case", sorted(CASES))
def test_reference_csvs_of_real_batsim_are_reproduced(case, data, tmp_path):
    from simulator.outputs import write_outputs

    sim = make_sim(*_inputs(data, case)[:1], [_inputs(data, case)[1]], allow_compute_sharing=True)
    drive(sim, Fcfs(), through_json=True)
    prefix = tmp_path / case
    write_outputs(str(prefix), sim.job_records(), sim.machines, sim.nb_compute, 0.0, 0.0)
    reference = data / "batsim-reference" / case
    assert_jobs_match(Path(f"{prefix}_jobs.csv"), reference / "jobs.csv")
    assert_schedule_matches(
        Path(f"{prefix}_schedule.csv"), reference / "schedule.csv", CASES[case][2]
    )
    assert_machine_states_match(
        Path(f"{prefix}_machine_states.csv"), reference / "machine_states.csv"
    )


def _run_cli_against_fcfs(platform, workload, prefix, env, *extra):
    endpoint = free_endpoint()
    result: dict = {}

    def decision_process():
        try:
            result["messages"] = serve(endpoint)
        except Exception as exc:  # surfaced by the assertion below
            result["error"] = exc

    thread = threading.Thread(target=decision_process, daemon=True)
    thread.start()
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "sim", "-p", str(platform), "-w", str(workload),
         "-e", str(prefix), "-s", endpoint, "--enable-compute-sharing", "--reply-timeout", "20",
         *extra],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    thread.join(timeout=20)
    assert not thread.is_alive() and "error" not in result, result
    return proc


def test_timewarp_sim_over_zmq_writes_batsims_files_and_evalys_loads_them(
    data, tmp_path, subprocess_env
):
    platform, workload = _inputs(data, "200_delay170")
    prefix = tmp_path / "out" / "burst"
    proc = _run_cli_against_fcfs(platform, workload, prefix, subprocess_env)
    assert proc.returncode == 0, proc.stderr
    reference = data / "batsim-reference/200_delay170"
    jobs = Path(f"{prefix}_jobs.csv")
    assert jobs.read_text().splitlines()[0] == JOBS_HEADER
    assert_jobs_match(jobs, reference / "jobs.csv")
    assert_schedule_matches(Path(f"{prefix}_schedule.csv"), reference / "schedule.csv", 2210.0)

    from evalys.jobset import JobSet

    jobset = JobSet.from_csv(str(jobs))
    assert len(jobset.df) == 200
    assert jobset.df["finish_time"].max() == pytest.approx(2210.0)


def test_same_inputs_and_decisions_give_byte_identical_outputs(data, tmp_path, subprocess_env):
    platform, workload = _inputs(data, "KIT_10h_80")
    outputs = []
    for run in ("a", "b"):
        prefix = tmp_path / run / "kit"
        proc = _run_cli_against_fcfs(
            platform, workload, prefix, subprocess_env, "--reproducible", "-q"
        )
        assert proc.returncode == 0, proc.stderr
        outputs.append(
            [
                Path(f"{prefix}_{kind}.csv").read_bytes()
                for kind in ("jobs", "schedule", "machine_states")
            ]
        )
    assert outputs[0] == outputs[1]
