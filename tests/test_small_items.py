"""Issue 31's smaller items: days in --until, multi-day plots in hours or days, a
non-workload file given as -w named for what it looks like."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from commands import plots
from commands.simulate import sim_duration
from commands.timeaxis import time_unit

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = ROOT / "examples/inputs/cluster16.xml"


@pytest.mark.parametrize(
    "text, seconds",
    [("3d", 259200), ("1d12h", 129600), ("1.5d", 129600), ("90m", 5400), ("3600", 3600),
     ("2h", 7200)],
)  # fmt: skip
def test_until_takes_days(text, seconds):
    assert sim_duration(text) == seconds


def test_until_refuses_a_bad_duration_naming_days_too():
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="like 3d, 1h"):
        sim_duration("3x")


def test_time_axis_units():
    assert time_unit(3600) == (1.0, "s")
    assert time_unit(6 * 3600) == (3600.0, "h")
    assert time_unit(3 * 86400) == (86400.0, "days")


@pytest.mark.parametrize("horizon, unit, right", [(600, "s", 600), (3 * 86400, "days", 3)])
def test_gantt_and_utilisation_are_drawn_in_the_unit_of_the_run(monkeypatch, horizon, unit, right):
    seen = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: seen.append(fig) or path)
    lanes = {0: [(0.0, horizon / 2, True)], 1: [(horizon / 4, float(horizon), True)]}
    plots.gantt(lanes, {0: "a", 1: "b"}, Path("g.png"))
    plots.utilisation(lanes, {0: "a", 1: "b"}, Path("u.png"))
    gantt_ax = seen[0].axes[0]
    assert gantt_ax.get_xlabel() == f"simulated time ({unit})"
    assert gantt_ax.get_xlim()[1] == pytest.approx(right * 1.01)
    heat = seen[1].axes[1]
    assert heat.get_xlabel() == f"simulated time ({unit})"
    assert heat.get_xlim()[1] == pytest.approx(right)


SWF = "; MaxProcs: 4\n1 0 0 50 1 -1 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n"
YAML = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"


@pytest.mark.parametrize(
    "content, words",
    [
        (SWF, "it looks like an SWF trace (Parallel Workloads Archive): convert it with "
              "`timewarp workload from-swf"),
        (YAML, "it looks like Kubernetes YAML: workloads are Batsim JSON"),
        ('{"apiVersion": "v1", "kind": "List", "items": []}',
         "it looks like a kubectl List (kubectl get ... -o json): convert it with "
         "`timewarp workload from-cluster"),
        (gzip.compress(b'{"items": []}', mtime=0), "it is gzipped"),
        ("<?xml version='1.0'?>\n<platform/>", "looks like a platform (XML)"),
        ("name,cpu_milli,memory_mib\n", "from-alibaba"),
        ('{"jobs": [', "malformed JSON at line 1"),
    ],
)  # fmt: skip
def test_a_file_that_is_not_a_workload_is_named_for_what_it_looks_like(
    tmp_path, subprocess_env, content, words
):
    path = tmp_path / "input"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    out = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "--scheduler", "true", "-p", PLATFORM,
         "-w", path, "-o", tmp_path / "out"],
        capture_output=True, text=True, env=subprocess_env, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 2 and words in out.stderr, out.stderr


JOBS_HEADER = (
    "job_id,workload_name,profile,submission_time,requested_number_of_resources,"
    "requested_time,success,final_state,starting_time,execution_time,finish_time,"
    "waiting_time,turnaround_time,stretch,allocated_resources,consumed_energy,metadata\n"
)


def _job_line(job_id, workload, state, start, end, res):
    return (f"{job_id},{workload},p,{start},1,-1,1,{state},{start},{end - start},{end},0,"
            f"{end - start},1,{res},-1,\"\"\n")  # fmt: skip


def test_a_service_run_says_its_scaled_down_pods_were_deleted_not_failed(tmp_path, monkeypatch):
    import io

    from matplotlib.colors import to_hex

    from commands import report

    prefix = tmp_path / "out"
    (tmp_path / "out_jobs.csv").write_text(
        JOBS_HEADER
        + _job_line("1", "w0", "COMPLETED_KILLED", 0, 50, 0)  # a batch job killed: a failure
        + _job_line("default.web-1", "k8s", "COMPLETED_KILLED", 0, 100, 1)  # scaled down
        + _job_line("default.web-2", "k8s", "COMPLETED_SUCCESSFULLY", 0, 300, 1)
    )
    (tmp_path / "out_running.csv").write_text(
        "job_id,workload_name,profile,submission_time,starting_time,allocated_resources,"
        "stopped_at\ndefault.web-3,k8s,p,10.000000,10.000000,0,300.000000\n"
    )
    figures = report.summarise(prefix, {}, 1.0)
    assert figures["controller_pods_deleted"] == 1
    text = io.StringIO()
    report.print_summary({**figures, "nb_jobs_success": 1}, text)
    assert "(and 1 pods deleted by their controller: scale-downs, not" in text.getvalue()
    seen = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: seen.append(fig) or path)
    report.plot(prefix, tmp_path, ["n0", "n1"])
    colours = {to_hex(c) for c in seen[0].axes[0].collections[0].get_facecolors()}
    assert colours == {plots.FAILED_COLOUR, plots.DELETED_COLOUR, plots.OK_COLOUR,
                       plots.RUNNING_COLOUR}  # fmt: skip
    legend = [t.get_text() for t in seen[0].legends[0].get_texts()]
    assert "pod deleted by its controller (scale-down)" in legend
    assert "still running at the stop" in legend


def test_a_partial_run_writes_the_pods_still_running(tmp_path, subprocess_env):
    service = ROOT / "examples/inputs/service_step"
    out = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
         "--scheduler", "python -m sample_schedulers.default_like",
         "--scheduler", "python -m sample_schedulers.hpa", "--until", "20m",
         "-p", service / "platform.xml", "-w", service / "workload.json", "-o", tmp_path],
        capture_output=True, text=True, env=subprocess_env, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    import csv

    running = list(csv.DictReader(open(tmp_path / "out_running.csv")))
    ended = {r["job_id"] for r in csv.DictReader(open(tmp_path / "out_jobs.csv"))}
    assert running and not ended & {r["job_id"] for r in running}
    assert {r["stopped_at"] for r in running} == {"1200.000000"}
    assert all(float(r["starting_time"]) < 1200 for r in running)
