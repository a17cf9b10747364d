"""`timewarp workload from-cluster` (a kubectl List snapshot) and `from-alibaba` (Alibaba's
GPU cluster trace): the field mapping, the selection options, bad input, the bundled
samples, and both samples replayed through `timewarp simulate`."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from simrun import run_simulate

from simulator import alibaba, kube_import
from simulator.trace_select import SOURCE_ANNOTATION

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "examples/inputs/cluster_snapshot/snapshot.json.gz"
ALIBABA = ROOT / "examples/inputs/alibaba_gpu"


def _tool(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "workload", *map(str, args)],
        env=env, capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip


def _import_snapshot(tmp_path, env, *extra):
    out = _tool(env, "from-cluster", SNAPSHOT, "-o", tmp_path / "wl.json",
                "-p", tmp_path / "p.xml", *extra)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads((tmp_path / "wl.json").read_text()), out.stderr


@pytest.mark.parametrize(
    "folder, outputs",
    [("cluster_snapshot", ["snapshot.json.gz"]), ("alibaba_gpu", ["pods.csv", "nodes.csv"])],
)
def test_the_bundled_samples_are_their_scripts_output(tmp_path, folder, outputs):
    shutil.copy(ROOT / "examples/inputs" / folder / "generate.py", tmp_path)
    subprocess.run([sys.executable, "generate.py"], cwd=tmp_path, check=True, timeout=120)
    for name in outputs:
        assert (tmp_path / name).read_bytes() == (
            ROOT / "examples/inputs" / folder / name
        ).read_bytes()


def _node(dump_name, cpu="4", taints=None, unschedulable=False, labels=None):
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": dump_name, "labels": labels or {"zone": "a"},
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }  # fmt: skip


def _pod(name, created, *, start=None, finished=None, owner=None, cpu="500m", ns="default",
         priority=None):  # fmt: skip
    status = {"phase": "Pending"}
    if start:
        status = {"phase": "Running", "startTime": start}
        state = {"terminated": {"finishedAt": finished}} if finished else {"running": {}}
        status["containerStatuses"] = [{"name": "c", "state": state}]
    meta = {"name": name, "namespace": ns, "creationTimestamp": created, "labels": {"a": "b"}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1]}]
    extra = {"priorityClassName": priority[0], "priority": priority[1]} if priority else {}
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"schedulerName": "default-scheduler", **extra,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}},
                                {"name": "d", "resources": {"requests": {"cpu": "250m",
                                                                         "memory": "1Gi"}}}]},
        "status": status,
    }  # fmt: skip


def test_a_snapshot_maps_nodes_pods_deployments_and_hpas():
    snap = kube_import.read_dump(SNAPSHOT)
    converted = kube_import.convert(snap, source="s")
    nodes = dict(converted.nodes)
    assert len(nodes) == 50
    gpu = nodes["gpu-0"]
    assert "nvidia.com/gpu=4" in gpu["allocatable"] and "cpu=32" in gpu["allocatable"]
    assert gpu["taints"] == "nvidia.com/gpu=present:NoSchedule"
    assert "accelerator=nvidia-a100" in gpu["labels"]
    assert nodes["control-plane-0"]["taints"] == "node-role.kubernetes.io/control-plane:NoSchedule"
    wl = converted.workload
    assert len(wl["jobs"]) == 938  # 1,000 less 50 kube-proxy and 12 Deployment pods
    assert converted.skipped == {
        "owned by a DaemonSet": 50,
        "a Deployment's, replayed as its service": 12,
    }
    services = {s["name"]: s for s in wl["services"]}
    assert sorted(services) == ["api", "coredns", "web"]
    web = services["web"]
    # the HPA saw 70 % of 6 × 500m: the traffic keeps that (6 × 0.5 × 0.7 / 0.05 s)
    assert web["traffic"] == {"type": "constant", "rate": 42.0, "duration": 3600.0}
    assert web["horizontalPodAutoscaler"]["spec"]["maxReplicas"] == 20
    assert web["deployment"]["spec"]["replicas"] == 6
    assert "horizontalPodAutoscaler" not in services["api"]
    # every job's pod says which pod of the snapshot it was
    names = [j["annotations"][SOURCE_ANNOTATION] for j in wl["jobs"]]
    assert len(set(names)) == 938 and all(n.startswith("batch/") for n in names)
    gpu_jobs = [p for p in wl["profiles"].values() if "nvidia.com/gpu" in p["requests"]]
    assert gpu_jobs and all(p["nodeSelector"] == {"accelerator": "nvidia-a100"} for p in gpu_jobs)


def test_lifetimes_come_from_status_then_events_and_the_snapshot_time():
    items = [
        _node("n1"),
        _pod("done", "2026-01-01T00:00:00Z", start="2026-01-01T00:00:10Z",
             finished="2026-01-01T00:05:10Z"),
        _pod("running", "2026-01-01T00:01:00Z", start="2026-01-01T00:01:00Z"),
        _pod("pending", "2026-01-01T00:02:00Z"),
        _pod("evented", "2026-01-01T00:03:00Z"),
        {"kind": "Event", "metadata": {"name": "e1"}, "reason": "Started",
         "involvedObject": {"kind": "Pod", "name": "evented", "namespace": "default"},
         "firstTimestamp": "2026-01-01T00:03:30Z"},
        {"kind": "Event", "metadata": {"name": "e2"}, "reason": "Killing",
         "involvedObject": {"kind": "Pod", "name": "evented", "namespace": "default"},
         "firstTimestamp": "2026-01-01T00:04:30Z"},
        {"kind": "Event", "metadata": {"name": "e3"}, "reason": "Scheduled",
         "involvedObject": {"kind": "Pod", "name": "x", "namespace": "default"},
         "lastTimestamp": "2026-01-01T00:10:00Z"},  # the latest time: the snapshot's
    ]  # fmt: skip
    snap = kube_import.Snapshot()
    for item in items:
        {"Node": snap.nodes, "Pod": snap.pods, "Event": snap.events}[item["kind"]].append(item)
    snap.now = kube_import._time("2026-01-01T00:10:00Z", "t")
    wl = kube_import.convert(snap, source="s", default_lifetime=77).workload
    delays = {
        j["annotations"][SOURCE_ANNOTATION]: (j["subtime"], wl["profiles"][j["profile"]]["delay"])
        for j in wl["jobs"]
    }
    assert delays == {
        "default/done": (0, 300),
        "default/running": (60, 540),  # until the snapshot's time
        "default/pending": (120, 77),
        "default/evented": (180, 60),
    }
    profile = wl["profiles"][wl["jobs"][0]["profile"]]
    assert profile["requests"] == {"cpu": "750m", "memory": "1Gi"}  # two containers summed


def test_v1_hpa_cordon_and_replicaset_without_deployment(tmp_path, subprocess_env):
    cloud = _node("n3")
    cloud["status"]["allocatable"].update({"attachable-volumes-aws-ebs": "25",
                                            "hugepages-2Mi": "0"})  # fmt: skip
    items = [
        cloud,
        _node("n1", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
              unschedulable=True),
        _node("n2", cpu="8"),
        _pod("rs-abc", "2026-01-01T00:00:00Z", owner=("ReplicaSet", "rs")),
        _pod("urgent", "2026-01-01T00:00:01Z", priority=("high", 1000)),
        _pod("critical", "2026-01-01T00:00:02Z", priority=("system-cluster-critical", 2000000000)),
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "shop.front", "namespace": "web"},
         "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "f"}},
                  "template": {"metadata": {"labels": {"app": "f"}},
                               "spec": {"priorityClassName": "high",
                                        "containers": [{"name": "f", "image": "f:1"}]}}}},
        {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
         "metadata": {"name": "front", "namespace": "web"},
         "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "shop.front"},
                  "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 50},
         "status": {"currentCPUUtilizationPercentage": 40}},
    ]  # fmt: skip
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"kind": "List", "items": items}))
    out = _tool(subprocess_env, "from-cluster", dump, "-o", tmp_path / "wl.json",
                "-p", tmp_path / "p.xml")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert 'id="unschedulable" value="true"' in (tmp_path / "p.xml").read_text()
    # a cloud's own node resources are left out, hugepages kept
    assert "attachable-volumes" not in (tmp_path / "p.xml").read_text()
    assert "hugepages-2Mi=0" in (tmp_path / "p.xml").read_text()
    assert "node.kubernetes.io/unschedulable" not in (tmp_path / "p.xml").read_text()
    wl = json.loads((tmp_path / "wl.json").read_text())
    assert wl["profiles"]["p0"]["replicaset"] == "rs"
    # a cluster's own PriorityClass is not in the dump: the resolved priority comes along
    assert wl["profiles"]["p1"]["pod"] == {"spec": {"priority": 1000}}
    assert "priorityClassName" not in wl["profiles"]["p1"]
    assert wl["profiles"]["p2"]["priorityClassName"] == "system-cluster-critical"
    (svc,) = wl["services"]
    assert svc["name"] == "shop-front"
    assert "priorityClassName" not in svc["deployment"]["spec"]["template"]["spec"]
    metric = svc["horizontalPodAutoscaler"]["spec"]["metrics"][0]["resource"]
    assert metric["target"] == {"type": "Utilization", "averageUtilization": 50}
    # no cpu request in the template: --default-cpu's 100m, at the 40 % the HPA saw
    assert svc["traffic"]["rate"] == pytest.approx(2 * 0.1 * 0.4 / 0.05)


def test_fraction_window_and_scale_select_and_stretch(tmp_path, subprocess_env):
    full, _ = _import_snapshot(tmp_path, subprocess_env)
    names = lambda wl: {j["annotations"][SOURCE_ANNOTATION] for j in wl["jobs"]}  # noqa: E731
    half, _ = _import_snapshot(tmp_path, subprocess_env, "--fraction", "0.5")
    tenth, _ = _import_snapshot(tmp_path, subprocess_env, "--fraction", "0.1")
    assert names(tenth) < names(half) < names(full)
    assert 350 < len(half["jobs"]) < 590
    scaled, _ = _import_snapshot(tmp_path, subprocess_env, "--scale", "0.5")
    assert [j["subtime"] for j in scaled["jobs"]] == [
        pytest.approx(j["subtime"] / 2, abs=0.001) for j in full["jobs"]
    ]
    window, err = _import_snapshot(tmp_path, subprocess_env, "--window", "3600:7200")
    assert "outside --window/--fraction" in err
    assert window["jobs"][0]["subtime"] == 0 and window["jobs"][-1]["subtime"] < 3600


@pytest.mark.parametrize(
    "content, message",
    [
        ("[1, 2]", "expected a kubectl List"),
        ("{", "not JSON"),
        ('{"kind": "List", "items": []}', "no Node in the List"),
        ('{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n"}, '
         '"status": {"allocatable": {"cpu": "x"}}}]}', "(host n)"),
    ],
)  # fmt: skip
def test_a_bad_snapshot_exits_2_naming_the_problem(tmp_path, subprocess_env, content, message):
    dump = tmp_path / "dump.json"
    dump.write_text(content)
    out = _tool(subprocess_env, "from-cluster", dump, "-o", tmp_path / "w.json", "-p",
                tmp_path / "p.xml")  # fmt: skip
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert not (tmp_path / "w.json").exists() and not (tmp_path / "p.xml").exists()


def test_a_gzipped_snapshot_reads_as_the_plain_one(tmp_path):
    plain = tmp_path / "s.json"
    plain.write_bytes(gzip.decompress(SNAPSHOT.read_bytes()))
    assert kube_import.read_dump(plain) == kube_import.read_dump(SNAPSHOT)


def test_alibaba_gpu_fractions_become_an_extended_resource():
    nodes = dict(alibaba.read_nodes(ALIBABA / "nodes.csv"))
    assert nodes["openb-node-0004"] == {
        "allocatable": "cpu=96000m,memory=393216Mi,nvidia.com/gpu=8,alibaba.com/gpu-milli=8000",
        "labels": "alibaba.com/gpu-model=V100M32",
    }
    assert nodes["openb-node-0000"] == {"allocatable": "cpu=96000m,memory=786432Mi"}
    pods = alibaba.read_pods(ALIBABA / "pods.csv")
    wl = alibaba.convert(pods, source="pods.csv")
    rows = {r["name"]: r for r in csv.DictReader(open(ALIBABA / "pods.csv"))}
    for job in wl["jobs"]:
        row = rows[job["annotations"][SOURCE_ANNOTATION]]
        profile = wl["profiles"][job["profile"]]
        want = int(row["num_gpu"]) * int(row["gpu_milli"])
        assert profile["requests"].get(alibaba.GPU_MILLI, 0) == want
        assert profile["requests"]["cpu"] == f"{row['cpu_milli']}m"
        if row["deletion_time"]:
            assert profile["delay"] == int(row["deletion_time"]) - int(row["scheduled_time"])
        if want and row["gpu_spec"]:
            assert profile["nodeSelector"] == {alibaba.GPU_MODEL_LABEL: row["gpu_spec"]}
    assert {p["requests"].get(alibaba.GPU_MILLI) for p in wl["profiles"].values()} >= {250, 500}


def test_alibaba_bad_rows_name_file_line_and_column(tmp_path, subprocess_env):
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\np,1,1,0,0,abc\n")
    out = _tool(subprocess_env, "from-alibaba", pods, "--nodes", ALIBABA / "nodes.csv",
                "-o", tmp_path / "w.json", "-p", tmp_path / "p.xml")  # fmt: skip
    assert out.returncode == 2
    assert f"{pods}:2: column creation_time: not a number: 'abc'" in out.stderr
    pods.write_text("name,cpu\np,1\n")
    out = _tool(subprocess_env, "from-alibaba", pods, "--nodes", ALIBABA / "nodes.csv",
                "-o", tmp_path / "w.json", "-p", tmp_path / "p.xml")  # fmt: skip
    assert out.returncode == 2 and "line 1: missing column(s) cpu_milli" in out.stderr


def test_the_alibaba_sample_runs_with_default_like(tmp_path, subprocess_env):
    out = _tool(subprocess_env, "from-alibaba", ALIBABA / "pods.csv", "--nodes",
                ALIBABA / "nodes.csv", "-o", tmp_path / "w.json", "-p", tmp_path / "p.xml")  # fmt: skip
    assert out.returncode == 0, out.stderr
    run = run_simulate(tmp_path / "out", subprocess_env, "python -m sample_schedulers.default_like",
                       tmp_path / "p.xml", tmp_path / "w.json")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "out/out_jobs.csv")))
    assert len(rows) == 300 and {r["final_state"] for r in rows} == {"COMPLETED_SUCCESSFULLY"}
    # GPU shares are contended: some pods waited for one
    assert max(float(r["waiting_time"]) for r in rows) > 0


def test_a_share_of_the_snapshot_replays_with_default_like_and_the_hpa(tmp_path, subprocess_env):
    _import_snapshot(tmp_path, subprocess_env, "--fraction", "0.1", "--duration", "900")
    run = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
         "--scheduler", "python -m sample_schedulers.default_like",
         "--scheduler", "python -m sample_schedulers.hpa",
         "-p", tmp_path / "p.xml", "-w", tmp_path / "wl.json", "-o", tmp_path / "out"],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    services = list(csv.DictReader(open(tmp_path / "out/out_services.csv")))
    assert {r["service"] for r in services} == {"api", "coredns", "web"}
    jobs = list(csv.DictReader(open(tmp_path / "out/out_jobs.csv")))
    assert sum(1 for r in jobs if r["final_state"] == "COMPLETED_SUCCESSFULLY") >= 80


def test_from_swf_takes_fraction_and_scale_too(tmp_path, subprocess_env):
    swf = tmp_path / "t.swf"
    swf.write_text("; MaxProcs: 4\n" + "".join(
        f"{i} {100 + 10 * i} 0 50 1 -1 -1 1 60 -1 1 1 1 1 1 1 -1 -1\n" for i in range(1, 201)
    ))  # fmt: skip
    runs = {}
    for name, extra in (("all", ()), ("half", ("--fraction", "0.5", "--scale", "2"))):
        out = _tool(subprocess_env, "from-swf", swf, "-o", tmp_path / f"{name}.json", *extra)
        assert out.returncode == 0, out.stderr
        runs[name] = json.loads((tmp_path / f"{name}.json").read_text())["jobs"]
    assert [j["subtime"] for j in runs["all"][:3]] == [0, 10, 20]
    kept = {j["id"] for j in runs["half"]}
    assert 70 < len(kept) < 130 and kept < {j["id"] for j in runs["all"]}
    first = int(runs["half"][0]["id"])
    assert [j["subtime"] for j in runs["half"]] == [
        20 * (int(j["id"]) - first) for j in runs["half"]
    ]


@pytest.mark.slow  # a minute of wall time: 938 jobs, 3 services, six simulated hours
def test_the_whole_snapshot_replays_with_default_like_and_the_hpa(tmp_path, subprocess_env):
    _import_snapshot(tmp_path, subprocess_env)
    run = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots",
         "--scheduler", "python -m sample_schedulers.default_like",
         "--scheduler", "python -m sample_schedulers.hpa",
         "-p", tmp_path / "p.xml", "-w", tmp_path / "wl.json", "-o", tmp_path / "out"],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    jobs = list(csv.DictReader(open(tmp_path / "out/out_jobs.csv")))
    batch = [r for r in jobs if r["workload_name"] == "w0"]
    assert len(batch) == 938 and {r["final_state"] for r in batch} == {"COMPLETED_SUCCESSFULLY"}
    services = list(csv.DictReader(open(tmp_path / "out/out_services.csv")))
    web = [int(r["desired_replicas"]) for r in services if r["service"] == "web"]
    assert web[0] == 6 and max(web) > 6  # the HPA scaled it: 70 % seen against a 60 % target
