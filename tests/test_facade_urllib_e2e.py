"""Issue 17 item 1 end to end: a scheduler written with urllib.request (a connection per
request, each closed by the server after its answer) runs through `timewarp simulate` to
the end — twice, with byte-identical outputs. Before closed connections were kept in the
facade's ledger, its reader was counted busy forever and the run ended with no message
from Batsim."""

import csv
from pathlib import Path

from simrun import run_simulate

ROOT = Path(__file__).resolve().parent.parent
SCHEDULER = "python tests/programs/urllib_scheduler.py"
PLATFORM = ROOT / "examples" / "inputs" / "cluster16.xml"
BURST = ROOT / "examples" / "inputs" / "burst_40_delay170.json"


def test_a_urllib_scheduler_runs_to_the_end_twice_identically(tmp_path, subprocess_env):
    outputs = []
    for run in ("a", "b"):
        out = tmp_path / run
        proc = run_simulate(out, subprocess_env, SCHEDULER, PLATFORM, BURST)
        assert proc.returncode == 0, proc.stderr[-3000:]
        with open(out / "out_jobs.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 40
        assert {r["final_state"] for r in rows} == {"COMPLETED_SUCCESSFULLY"}
        outputs.append(
            ((out / "out_jobs.csv").read_bytes(), (out / "out_schedule.csv").read_bytes())
        )
    assert outputs[0] == outputs[1]
