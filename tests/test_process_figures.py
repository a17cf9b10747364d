"""Where a run's time goes, per process: CPU and API requests by verb and resource, in
the manifest and the summary (commands/process_figures.py, broker/facade/requestinfo.py)."""

from __future__ import annotations

import json
import pstats
import subprocess
import sys
import threading
import time

import pytest
from simrun import OUT_CSVS, ROOT, run_simulate

from broker.facade.requestinfo import request_info
from commands.determinism_check import _without_run_cost
from commands.process_figures import add_runtime_share
from simulator.testing import write_platform, write_workload
from timewarp._core import selftime
from timewarp.wire import clockproto

EXAMPLES = ROOT / "examples" / "inputs"


@pytest.mark.parametrize(
    ("method", "target", "expected"),
    [
        ("GET", "/api/v1/pods?watch=true&resourceVersion=3", ("watch", "pods")),
        ("GET", "/api/v1/namespaces/default/pods", ("list", "pods")),
        ("GET", "/api/v1/namespaces/default/pods/w0.1", ("get", "pods")),
        ("POST", "/api/v1/namespaces/default/pods/w0.1/binding", ("create", "pods/binding")),
        ("POST", "/api/v1/namespaces/default/bindings", ("create", "bindings")),
        ("PATCH", "/apis/apps/v1/namespaces/d/deployments/web/scale", ("patch", "deployments.apps/scale")),
        ("GET", "/api/v1/namespaces", ("list", "namespaces")),
        ("GET", "/api/v1/namespaces/default", ("get", "namespaces")),
        ("DELETE", "/api/v1/namespaces/d/pods", ("deletecollection", "pods")),
        ("GET", "/apis/metrics.k8s.io/v1beta1/nodes", ("list", "nodes.metrics.k8s.io")),
        ("GET", "/version", ("get", "/version")),
    ],
)  # fmt: skip
def test_requests_are_named_as_kube_apiserver_names_them(method, target, expected):
    assert request_info(method, target) == expected


def test_the_manifest_and_summary_say_what_each_process_asked_and_spent(tmp_path, subprocess_env):
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, "python -m sample_schedulers.default_like --scheduler-name default",
        EXAMPLES / "cluster16.xml", EXAMPLES / "burst_40_delay170.json", quiet=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    (entry,) = json.loads((out / "manifest.json").read_text())["processes"].values()
    kinds = entry["requests_by_verb_and_resource"]
    assert kinds["create bindings"] == 40  # one per pod
    assert kinds["list nodes"] >= 1 and kinds["watch pods"] >= 1
    assert entry["requests"] == sum(kinds.values())
    assert entry["user_cpu_s"] > 0 and entry["system_cpu_s"] >= 0
    assert f"scheduler-0: cpu {entry['user_cpu_s'] + entry['system_cpu_s']:.2f} s, " in r.stderr
    assert "API requests (create bindings 40" in r.stderr
    # the runtime's share of the process's CPU, measured by the process (issue 30)
    assert 0 < entry["runtime_cpu_share"] < 1 and entry["runtime_cpu_s"] > 0
    assert f"{entry['runtime_cpu_share']:.0%} of its cpu in timewarp's runtime" in r.stderr
    assert "profile" not in entry  # no --profile, no profile


def _small_inputs(tmp_path):
    platform = write_platform(tmp_path / "p.xml", 2, cores=1)
    profiles = {"d": {"type": "delay", "delay": 30, "cpu": "1", "scheduler": "default"}}
    jobs = [{"id": str(i), "subtime": 5 * i, "res": 1, "profile": "d"} for i in range(6)]
    return platform, write_workload(tmp_path / "w.json", jobs, profiles)


def test_profile_writes_one_profile_per_process_and_changes_no_output(tmp_path, subprocess_env):
    platform, workload = _small_inputs(tmp_path)
    plain, profiled = tmp_path / "plain", tmp_path / "profiled"
    scheduler = "python -m sample_schedulers.default_like --scheduler-name default"
    for out, extra in ((plain, ()), (profiled, ("--profile",))):
        r = run_simulate(out, subprocess_env, scheduler, platform, workload, *extra)
        assert r.returncode == 0, r.stderr[-3000:]
    for name in (*OUT_CSVS, "out_decisions.csv", "scheduler-0.log"):
        assert (plain / name).read_bytes() == (profiled / name).read_bytes(), name
    assert not list(plain.glob("*.prof"))
    (entry,) = json.loads((profiled / "manifest.json").read_text())["processes"].values()
    assert entry["profile"] == "profile-scheduler-0.prof"
    stats = pstats.Stats(str(profiled / entry["profile"]))
    files = {where[0] for where in stats.stats}  # type: ignore[attr-defined]
    assert any(f.endswith("default_like/__main__.py") for f in files)


THREADS = """
import threading, time
def in_main(): time.sleep(1)
def in_thread(): time.sleep(2)
t = threading.Thread(target=in_thread); t.start()
in_main(); t.join()
"""


def test_run_profile_covers_every_thread(tmp_path, subprocess_env):
    program = tmp_path / "prog.py"
    program.write_text(THREADS)
    r = subprocess.run(
        [sys.executable, "-m", "timewarp", "run", "--standalone", "--profile", tmp_path / "p",
         "--", "python", program],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    stats = pstats.Stats(str(tmp_path / "p" / "profile-main.prof"))
    names = {where[2] for where in stats.stats}  # type: ignore[attr-defined]
    assert {"in_main", "in_thread"} <= names


def test_the_runtime_share_is_added_per_process_and_left_out_of_the_check():
    cpu = {"a": {"user_cpu_s": 1.0, "system_cpu_s": 0.0}}
    got = {"runtime_cpu_ns": 250_000_000, "process_cpu_ns": 1_000_000_000, "profile": "/x/p.prof"}
    add_runtime_share(cpu, {"a": got, "b": {**got, "profile": ""}})
    assert cpu["a"] == {"user_cpu_s": 1.0, "system_cpu_s": 0.0, "runtime_cpu_s": 0.25,
                        "runtime_cpu_share": 0.25, "profile": "p.prof"}  # fmt: skip
    assert "profile" not in cpu["b"]
    # machine figures: two runs of the same simulation may differ there, and still agree
    manifest = {"processes": {"a": cpu["a"]}}
    assert _without_run_cost(manifest) == {"processes": {"a": {"profile": "p.prof"}}}


def test_the_runtime_time_counts_nested_hooks_once():
    before = selftime.figures(None)["runtime_cpu_ns"]

    @selftime.timed
    def outer():
        inner()

    @selftime.timed
    def inner():
        end = time.thread_time_ns() + 20_000_000
        while time.thread_time_ns() < end:
            pass

    outer()
    spent = selftime.figures(None)["runtime_cpu_ns"] - before
    assert 20_000_000 <= spent < 40_000_000  # once, not twice


def test_the_runtime_time_of_threads_that_ended_still_counts():
    # each thread keeps its own count (no lock per hook): the figures add them all up
    before = selftime.figures(None)["runtime_cpu_ns"]

    @selftime.timed
    def hook():
        end = time.thread_time_ns() + 20_000_000
        while time.thread_time_ns() < end:
            pass

    threads = [threading.Thread(target=hook) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert selftime.figures(None)["runtime_cpu_ns"] - before >= 40_000_000


def test_a_thread_that_ended_leaves_no_cell_behind():
    # a thread per connection must not grow the cells: its count folds into the ended total
    hook = selftime.timed(lambda: None)
    hook()  # (this thread's own cell, made once)
    cells = len(selftime._cells)
    for _ in range(20):
        t = threading.Thread(target=hook)
        t.start()
        t.join()
    assert len(selftime._cells) == cells


def test_the_figures_messages_round_trip():
    msg = clockproto.figures(runtime_cpu_ns=5, process_cpu_ns=9, profile="")
    assert clockproto.decode_to_broker(clockproto.encode(msg)) == msg
    assert clockproto.decode_to_runtime(clockproto.encode(clockproto.report()))["op"] == "report"
    with pytest.raises(clockproto.ProtocolError, match="runtime_cpu_ns"):
        clockproto.decode_to_broker(clockproto.encode({**msg, "runtime_cpu_ns": -1}))
