"""What a new user meets in the first hour of `timewarp simulate` (issue 15): a scheduler
that never binds is reported instead of running on in silence, `--until` ends a run at a
simulated time, and the summary says where the outputs are and what its times mean."""

from __future__ import annotations

import json
import re

import pytest
from simrun import run_simulate

from simulator.testing import write_platform, write_workload

POLLER = "python tests/programs/polling_scheduler.py --interval 5"


def jobs_and_profiles(scheduler: str, delays=(10, 10, 100)):
    jobs = [
        {"id": str(i + 1), "subtime": 0, "res": 1, "profile": f"d{d}"} for i, d in enumerate(delays)
    ]
    profiles = {
        f"d{d}": {"type": "delay", "delay": d, "cpu": "1", "scheduler": scheduler}
        for d in set(delays)
    }
    return jobs, profiles


@pytest.fixture
def platform(tmp_path):
    return write_platform(tmp_path / "p.xml", 2, 1)


def manifest(out):
    return json.loads((out / "manifest.json").read_text())


def test_a_scheduler_that_never_binds_is_reported_and_until_ends_the_run(
    tmp_path, subprocess_env, platform
):
    """The commonest first mistake: the pods say `default`, the scheduler selects
    `default-scheduler`. The report names both; --until ends the run, outputs partial."""
    workload = write_workload(tmp_path / "w.json", *jobs_and_profiles("default"))
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, POLLER + " --scheduler-name default-scheduler", platform, workload,
        "--no-progress-after", "1m", "--until", "300", "--on-no-progress", "warn",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "WARNING: no progress: 3 pod(s) pending and none bound for 60 s" in r.stderr
    assert "the pending pods ask for schedulerName: 3 with 'default'" in r.stderr
    assert "scheduler-0 selects pods with spec.schedulerName 'default-scheduler'" in r.stderr
    assert "--scheduler-name default)" in r.stderr  # the fix, spelled out
    m = manifest(out)
    assert m["ok"] is True and m["outputs"] == "partial"
    assert m["figures"]["stopped_at_s"] == 300.0 and m["figures"]["simulated_s"] == 300.0
    assert len(m["warnings"]) == 1 and "no progress" in m["warnings"][0]
    # no job ended: no makespan of 0 s, but where the run stopped (the summary of a
    # partial run is printed even with -q)
    assert "stopped at simulated t=300.0 s" in r.stderr
    assert "makespan" not in r.stderr and "makespan" not in m["figures"]


def test_a_run_that_can_never_progress_stops_with_the_report(tmp_path, subprocess_env, platform):
    """Every job submitted, nothing bound for --no-progress-after: the run ends there
    (instead of simulating on for ever), outputs partial, the report as the reason, exit 4."""
    workload = write_workload(tmp_path / "w.json", *jobs_and_profiles("default"))
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, POLLER + " --scheduler-name default-scheduler", platform, workload,
        "--no-progress-after", "1m",
    )  # fmt: skip
    assert r.returncode == 4, r.stderr[-3000:]
    assert "no progress: 3 pod(s) pending and none bound for 60 s" in r.stderr
    assert "every job has been submitted: the run stops here" in r.stderr
    assert "stopped: no progress (PARTIAL outputs)" in r.stderr
    m = manifest(out)
    assert m["ok"] is False and m["outputs"] == "partial"
    assert m["reason"].startswith("no progress: 3 pod(s) pending")
    assert m["figures"]["stopped_by"] == "no progress"
    assert m["figures"]["stopped_at_s"] == 60.0
    assert len(m["warnings"]) == 1


def test_a_pod_that_waits_for_a_full_cluster_while_others_run_is_progress(
    tmp_path, subprocess_env, platform
):
    """Jobs starting and ending are progress: five 100 s jobs on two one-core nodes wait
    their turn for 200 s with --no-progress-after 30 s, and the run ends complete."""
    workload = write_workload(
        tmp_path / "w.json", *jobs_and_profiles("default-scheduler", (100,) * 5)
    )
    out = tmp_path / "out"
    r = run_simulate(out, subprocess_env, POLLER, platform, workload, "--no-progress-after", "30")
    assert r.returncode == 0, r.stderr[-3000:]
    assert manifest(out)["outputs"] == "complete"


def test_until_keeps_the_jobs_that_ended_by_then(tmp_path, subprocess_env, platform):
    workload = write_workload(tmp_path / "w.json", *jobs_and_profiles("default-scheduler"))
    out = tmp_path / "out"
    r = run_simulate(out, subprocess_env, POLLER, platform, workload, "--until", "1m")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = (out / "out_jobs.csv").read_text().splitlines()[1:]
    assert [row.split(",")[0] for row in rows] == ["1", "2"]  # job 3 ends at 105 s
    m = manifest(out)
    assert m["ok"] is True and m["outputs"] == "partial" and m["warnings"] == []
    assert m["figures"]["stopped_at_s"] == 60.0
    assert "stopped at --until (PARTIAL outputs)" in r.stderr


def test_a_full_cluster_is_not_reported(tmp_path, subprocess_env, platform):
    """Pods that cannot fit wait for capacity, not for a scheduler: no report."""
    workload = write_workload(tmp_path / "w.json", *jobs_and_profiles("default-scheduler",
                                                                      (300, 300, 300)))  # fmt: skip
    out = tmp_path / "out"
    r = run_simulate(out, subprocess_env, POLLER, platform, workload, "--no-progress-after", "30")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "no progress" not in r.stderr and manifest(out)["warnings"] == []


def test_the_summary_says_where_the_outputs_are_and_what_its_times_mean(
    tmp_path, subprocess_env, platform
):
    workload = write_workload(tmp_path / "w.json", *jobs_and_profiles("default-scheduler"))
    out = tmp_path / "out"
    r = run_simulate(out, subprocess_env, POLLER, platform, workload, quiet=False)
    assert r.returncode == 0, r.stderr[-3000:]
    text = re.sub(r"[│┌┐└┘─┬┴├┤┼]", " ", r.stderr)
    text = " ".join(text.split())
    assert f"outputs in {out}/" in r.stderr.splitlines()  # a line of its own, never cut
    assert "wall time of the simulation" in text
    assert "wall time of the whole command" in text and "start-up, shut-down" in text
    figures = manifest(out)["figures"]
    # the speed-up is simulated time at the end over the simulation's wall time, and it
    # is the one the progress bar ends with (issue 15 item 11)
    assert figures["speedup"] == pytest.approx(figures["simulated_s"] / figures["wall_s"], rel=0.01)


def test_quiet_means_only_warnings_and_errors(tmp_path, subprocess_env, platform):
    workload = write_workload(tmp_path / "w.json", *jobs_and_profiles("default-scheduler"))
    out = tmp_path / "out"
    r = run_simulate(out, subprocess_env, POLLER, platform, workload)  # -q
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr.strip() == ""


def test_a_failing_no_progress_report_is_switched_off_not_fatal():
    """The report reads the cluster model; should that ever fail, the run goes on."""
    from types import SimpleNamespace

    from commands.guards import NoProgressGuard

    said = []
    broken = SimpleNamespace(cluster=SimpleNamespace(stats=None))  # no .bindings
    guard = NoProgressGuard(broken, 60.0, said.append)
    guard.check(0.0)
    guard.check(1000.0)
    assert len(said) == 1 and "the no-progress report is off" in said[0]


def test_the_facade_records_which_scheduler_names_each_process_selects():
    from broker.facade.interest import SchedulerNameInterest

    seen = SchedulerNameInterest()
    seen.observe(
        "a", "GET", "/api/v1/pods?fieldSelector=spec.schedulerName%3Dmine%2Cspec.nodeName%3D"
    )
    seen.observe(
        "a", "GET", "/api/v1/namespaces/ns1/pods?watch=1&fieldSelector=spec.schedulerName!=x"
    )
    seen.observe("b", "GET", "/api/v1/nodes?fieldSelector=spec.schedulerName=no")  # not pods
    seen.observe("b", "POST", "/api/v1/namespaces/ns1/pods?fieldSelector=spec.schedulerName=no")
    seen.observe("c", "GET", "/api/v1/pods?fieldSelector=spec.schedulerName=ok,bad")  # a 400
    seen.observe("d", "GET", "/api/v1/pods")  # filters pods itself: nothing to record
    assert seen.snapshot() == {"a": ["mine", "not x"]}
