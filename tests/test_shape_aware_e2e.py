"""Issue 19 #4's proof: a label/taint/limits/GPU-aware scheduler written the ordinary way
(tests/programs/shape_aware_scheduler.py, official client) runs unmodified through
`timewarp simulate`, twice: it completes, the CSVs are byte-identical, and every pod is
where the cluster's shape says it may be. Its watch asks timeout_seconds=0, so the
server's own 30-60 virtual-minute limit ends it during the run (issue 19 #3)."""

from __future__ import annotations

import csv
import json

import pytest
from simrun import run_simulate

SCHEDULER = "python tests/programs/shape_aware_scheduler.py"
HOSTS = {  # host -> props; resource ids follow sorted host names
    "cpu-a": {"core": "4", "labels": "env=prod"},
    "cpu-b": {"core": "4", "labels": "env=prod", "unschedulable": "true"},
    "cpu-c": {"core": "2", "labels": "env=staging"},
    "gpu-a": {"core": "8", "gpu": "2", "labels": "env=prod,accelerator=nvidia",
              "taints": "dedicated=gpu:NoSchedule"},
    "gpu-b": {"allocatable": "cpu=8,nvidia.com/gpu=2", "labels": "env=prod,accelerator=nvidia",
              "taints": "dedicated=gpu:NoSchedule"},
}  # fmt: skip
GPU_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
PROFILES = {
    "web": {"type": "delay", "delay": 600, "scheduler": "shape-aware", "cpu": "1",
            "limits": {"cpu": "2", "memory": "1Gi"}, "nodeSelector": {"env": "prod"}},
    "batch": {"type": "delay", "delay": 300, "scheduler": "shape-aware", "cpu": "500m",
              "limits": {"cpu": "1"}},
    "train": {"type": "delay", "delay": 900, "scheduler": "shape-aware",
              "requests": {"cpu": "2", "nvidia.com/gpu": 1}, "limits": {"cpu": "4"},
              "nodeSelector": {"accelerator": "nvidia"}, "tolerations": [GPU_TOLERATION]},
    "staging": {"type": "delay", "delay": 200, "scheduler": "shape-aware", "cpu": "1",
                "limits": {"cpu": "1"}, "nodeSelector": {"env": "staging"},
                "pod": {"metadata": {"labels": {"tier": "staging"}},
                        "spec": {"securityContext": {"runAsNonRoot": True}}}},
}  # fmt: skip
ALLOWED = {"web": {"cpu-a"}, "staging": {"cpu-c"}, "train": {"gpu-a", "gpu-b"},
           "batch": {"cpu-a", "cpu-c"}}  # fmt: skip


def _platform(path):
    hosts = ['<host id="master" speed="1Gf"><prop id="role" value="master"/></host>']
    for name, props in HOSTS.items():
        body = "".join(f'<prop id="{k}" value="{v}"/>' for k, v in props.items())
        hosts.append(f'<host id="{name}" speed="1Gf">{body}</host>')
    path.write_text(
        '<?xml version="1.0"?><platform version="4.1"><zone id="z" routing="Full">'
        + "".join(hosts)
        + "</zone></platform>"
    )
    return path


def _workload(path):
    cycle = ["web", "batch", "train", "staging", "train", "batch"]
    jobs = [
        {"id": str(i), "subtime": 240 * i, "res": 1, "profile": cycle[i % len(cycle)]}
        for i in range(31)
    ]
    # six GPU jobs at once for four GPUs: two wait for the first ones to end
    jobs += [{"id": f"burst-{i}", "subtime": 3610, "res": 1, "profile": "train"} for i in range(6)]
    path.write_text(json.dumps({"nb_res": len(HOSTS), "jobs": jobs, "profiles": PROFILES}))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory, subprocess_env):
    base = tmp_path_factory.mktemp("shapes")
    platform, workload = _platform(base / "p.xml"), _workload(base / "w.json")
    outs = []
    for run in ("a", "b"):
        out = base / run
        proc = run_simulate(out, subprocess_env, SCHEDULER, platform, workload)
        assert proc.returncode == 0, proc.stderr + (out / "scheduler-0.log").read_text()
        outs.append(out)
    return outs


def _rows(out):
    with open(out / "out_jobs.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_it_completes_and_the_csvs_are_byte_identical(runs):
    first, second = runs
    for name in ("out_jobs.csv", "out_schedule.csv", "out_machine_states.csv"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    rows = _rows(first)
    assert len(rows) == 37
    assert {r["final_state"] for r in rows} == {"COMPLETED_SUCCESSFULLY"}


def test_every_pod_is_where_labels_taints_cordon_and_resources_allow(runs):
    names = sorted(HOSTS)
    by_profile = {}
    for row in _rows(runs[0]):
        host = names[int(row["allocated_resources"])]
        by_profile.setdefault(row["profile"], set()).add(host)
    assert "cpu-b" not in set().union(*by_profile.values())  # cordoned
    for profile, hosts in by_profile.items():
        assert hosts <= ALLOWED[profile], (profile, hosts)
    assert by_profile["train"] == {"gpu-a", "gpu-b"}


def test_gpus_are_never_oversubscribed_and_the_burst_waits_for_free_gpus(runs):
    rows = [r for r in _rows(runs[0]) if r["profile"] == "train"]
    spans = {}
    for r in rows:
        spans.setdefault(r["allocated_resources"], []).append(
            (float(r["starting_time"]), float(r["finish_time"]))
        )
    for node_spans in spans.values():
        for start, _ in node_spans:
            running = sum(1 for s, f in node_spans if s <= start < f)
            assert running <= 2, node_spans  # two GPUs per node
    burst = sorted(float(r["starting_time"]) for r in rows if r["job_id"].startswith("burst-"))
    assert burst[-1] > 3610 + 1, burst  # some had to wait for GPUs


def test_the_watch_with_timeout_0_was_ended_by_the_servers_limit(runs):
    log = (runs[0] / "scheduler-0.log").read_text()
    assert "the watch ended (server timeout)" in log
