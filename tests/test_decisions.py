"""out_decisions.csv and `timewarp explain`: every decision with the cluster at that
instant, and one pod's story told from the outputs (broker/cluster/decisions.py,
commands/explain.py)."""

from __future__ import annotations

import csv
import re
import subprocess
import sys

from simrun import ROOT, run_simulate

from commands.explain import story as story_lines
from simulator.testing import write_platform, write_workload

EXAMPLES = ROOT / "examples" / "inputs"
DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"


def _decisions(out):
    with open(out / "out_decisions.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def _explain(out, pod, env):
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "explain", str(out), pod],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_a_burst_run_records_every_binding_with_the_cluster_then(tmp_path, subprocess_env):
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, DEFAULT_LIKE, EXAMPLES / "cluster16.xml",
        EXAMPLES / "burst_40_delay170.json", "--check-determinism",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]  # out_decisions.csv identical in both runs
    rows = _decisions(out)
    assert [r["action"] for r in rows] == ["bind"] * 40
    assert {r["actor"] for r in rows} == {"scheduler-0"}
    first, last = rows[0], rows[-1]
    assert (first["time"], first["name"], first["job_id"]) == ("0", "w0.1", "w0!1")
    assert (first["feasible_nodes"], first["node_free_cpu_before"], first["node_free_cpu_after"]) == (
        "16", "1000", "0",
    )  # fmt: skip
    # the 40th pod waited for the second wave's end: 340 s, with 4 nodes left free
    assert (last["time"], last["waited_s"], last["feasible_nodes"]) == ("340", "340", "4")
    story = _explain(out, "w0!40", subprocess_env)
    assert story.returncode == 0, story.stderr
    assert story.stdout.splitlines() == [
        "pod default/w0.40 (job w0!40)",
        "  t=         0 s  submitted: the pod is created, Pending",
        f"  t=       340 s  bound to {last['target']} by scheduler-0: 4 node(s) could have "
        f"taken it; {last['target']} ranked 1 by free cpu; free cpu 1000m -> 0m; it had "
        "waited 340 s",
        f"  t=       340 s  started (resources {int(last['target'][-2:])})",
        "  t=       510 s  ended: COMPLETED_SUCCESSFULLY after 170 s",
    ]
    # the pod name leads to the same story as the job id (issue 31: names show the id)
    assert story.stdout == _explain(out, "w0.40", subprocess_env).stdout
    assert story.stdout == _explain(out, "default/w0.40", subprocess_env).stdout
    # a folder written when pod names were w0-2140: the new name still finds the job's pod
    old = tmp_path / "old"
    old.mkdir()
    (old / "out_jobs.csv").write_bytes((out / "out_jobs.csv").read_bytes())
    text = (out / "out_decisions.csv").read_text()
    (old / "out_decisions.csv").write_text(re.sub(r"\bw0\.(\d+),", r"w0-21\1,", text))
    assert "w0-2140" in (old / "out_decisions.csv").read_text()
    assert story_lines(old, "w0.40")[1:] == story.stdout.splitlines()[1:]


def test_a_refused_and_a_pending_pod_have_their_stories(tmp_path, subprocess_env):
    platform = write_platform(tmp_path / "p.xml", 2, cores=1)
    profiles = {
        "mine": {"type": "delay", "delay": 50, "cpu": "1", "scheduler": "default"},
        "other": {"type": "delay", "delay": 50, "cpu": "1", "scheduler": "nobody"},
    }
    jobs = [{"id": str(i), "subtime": 0, "res": 1, "profile": "mine"} for i in (1, 2)]
    jobs.append({"id": "3", "subtime": 0, "res": 1, "profile": "other"})
    workload = write_workload(tmp_path / "w.json", jobs, profiles)
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, "python tests/programs/first_node_binder.py", platform, workload,
        "--until", "100",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [(r["action"], r["name"], r["actor"], r["detail"]) for r in _decisions(out)]
    assert rows == [
        ("bind", "w0.1", "scheduler-0", ""),
        ("bind", "w0.2", "scheduler-0", ""),
        ("refused", "w0.2", "kubelet", "OutOfcpu"),
        ("pending", "w0.3", "-", "2/2 nodes would take it: no scheduler bound it"),
    ]
    refused = _explain(out, "default/w0.2", subprocess_env).stdout
    assert "refused by the kubelet on n000: OutOfcpu" in refused
    pending = _explain(out, "w0.3", subprocess_env).stdout
    assert "still pending at the end of the run: 2/2 nodes would take it" in pending


def test_explain_names_what_is_missing(tmp_path, subprocess_env):
    r = _explain(tmp_path, "w0.1", subprocess_env)
    assert r.returncode == 2
    assert f"{tmp_path}: no out_decisions.csv" in r.stderr
