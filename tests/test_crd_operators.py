"""Operators on their own custom resources, written the way their authors write them,
run unmodified through `timewarp simulate` twice (`--check-determinism`):

- a kopf operator for WorkerPools (``tests/programs/workerpools/``): create, update and
  delete handlers, a timer, status patches; its pools' owner (the official client's
  ``CustomObjectsApi``) creates, grows and deletes a pool. Once with the CRD installed
  by the owner as a setup step, once with the CRD and the pool declared in the workload.
  The delete handler runs because the pool's DELETE waits for kopf's finalizer."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from simrun import ROOT, run_simulate

from simulator.testing import write_platform, write_workload

DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"
POOLS = ROOT / "tests" / "programs" / "workerpools"
KOPF = f"kopf run --standalone --all-namespaces {POOLS / 'operator.py'}"
RENDER = {
    "apiVersion": "batch.example.com/v1",
    "kind": "WorkerPool",
    "metadata": {"name": "render", "namespace": "default"},
    "spec": {
        "replicas": 2,
        "template": {
            "metadata": {"annotations": {"timewarp.io/duration": "400"}},
            "spec": {
                "schedulerName": "default",
                "containers": [
                    {"name": "worker", "image": "render:1", "resources": {"requests": {"cpu": "1"}}}
                ],
            },
        },
    },
}


def _inputs(tmp_path: Path, declared: bool) -> tuple[Path, Path]:
    platform = write_platform(tmp_path / "p.xml", 2, cores=2)
    profile = {"type": "delay", "delay": 600, "cpu": "1", "scheduler": "default"}
    jobs = [{"id": "0", "subtime": 0, "res": 1, "profile": "d"}]
    workload = write_workload(tmp_path / "w.json", jobs, {"d": profile})
    if declared:
        doc = json.loads(workload.read_text())
        doc["customResourceDefinitions"] = [json.loads((POOLS / "crd.json").read_text())]
        doc["customResources"] = [RENDER]
        workload.write_text(json.dumps(doc))
    return platform, workload


@pytest.mark.parametrize("declared", [False, True], ids=["crd-by-setup-step", "crd-declared"])
def test_a_kopf_operator_runs_its_workerpools(tmp_path, subprocess_env, declared):
    platform, workload = _inputs(tmp_path, declared)
    owner = f"python {POOLS / 'owner.py'}" + ("" if declared else " --create-crd")
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, DEFAULT_LIKE, platform, workload,
        "--scheduler", KOPF, "--scheduler", owner, "--check-determinism",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    assert "the two runs wrote the same bytes" in r.stderr
    made_at = 0 if declared else 10
    first = ["pool render was declared"] if declared else [
        "installed the WorkerPool CRD", "created pool render",
    ]  # fmt: skip
    assert (out / "scheduler-2.log").read_text().splitlines() == [
        *first,
        't=100 status {"phase": "Active", "replicas": 2, "running": 2}',
        "grew pool render to 3",
        't=250 status {"phase": "Active", "replicas": 3, "running": 3}',
        "deleted pool render",
        "pool render gone at t=250",  # once the delete handler removed kopf's finalizer
    ]
    log = (out / "scheduler-1.log").read_text()
    for line in (
        "[default/render] created pod render-1",
        "[default/render] replicas 2 -> 3",
        "[default/render] created pod render-2",
        "[default/render] 3 of 3 pods running",
        "[default/render] deleted pod render-2 with its pool",
        "[default/render] Deletion is processed: 1 succeeded; 0 failed.",
    ):
        assert line in log
    with open(out / "out_jobs.csv", newline="") as handle:
        rows = {r["job_id"]: r for r in csv.DictReader(handle)}
    assert {
        j: (r["final_state"], r["starting_time"], r["finish_time"]) for j, r in rows.items()
    } == {
        "default.render-0": ("COMPLETED_KILLED", f"{made_at}.000000", "250.000000"),
        "default.render-1": ("COMPLETED_KILLED", f"{made_at}.000000", "250.000000"),
        "default.render-2": ("COMPLETED_KILLED", "100.000000", "250.000000"),
        "0": ("COMPLETED_SUCCESSFULLY", "0.000000", "600.000000"),
    }


WORKERSETS = ROOT / "tests" / "programs" / "workersets"
ENCODE = {
    "apiVersion": "apps.example.com/v1",
    "kind": "WorkerSet",
    "metadata": {"name": "encode", "namespace": "default"},
    "spec": {
        "replicas": 1,
        "template": {
            "metadata": {"labels": {"app": "encode"}},
            "spec": {
                "schedulerName": "default",
                "containers": [
                    {
                        "name": "encoder",
                        "image": "encode:1",
                        "resources": {"requests": {"cpu": "500m"}},
                    }
                ],
            },
        },
    },
}
ENCODE_HPA = {
    "apiVersion": "autoscaling/v2",
    "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "encode", "namespace": "default"},
    "spec": {
        "scaleTargetRef": {
            "apiVersion": "apps.example.com/v1",
            "kind": "WorkerSet",
            "name": "encode",
        },
        "minReplicas": 1,
        "maxReplicas": 5,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50},
                },
            }
        ],
    },
}


def test_the_sample_hpa_scales_a_custom_resource_a_dynamic_client_controller_serves(
    tmp_path, subprocess_env
):
    """A WorkerSet CRD with a scale subresource, one WorkerSet and an HPA on it declared in
    the workload; a controller written with ``kubernetes.dynamic`` makes its pods; the
    sample HPA finds the kind's ``scale`` by discovery and scales it as kube-controller-
    manager would: the pods use their whole request (100 % > 50 %), so it doubles once
    they are past the 300 s cpu initialisation period — at 300 s, then 600 s."""
    platform = write_platform(tmp_path / "p.xml", 2, cores=4)
    profile = {"type": "delay", "delay": 800, "cpu": "1", "scheduler": "default"}
    workload = write_workload(
        tmp_path / "w.json", [{"id": "0", "subtime": 0, "res": 1, "profile": "d"}], {"d": profile}
    )
    doc = json.loads(workload.read_text())
    doc["customResourceDefinitions"] = [json.loads((WORKERSETS / "crd.json").read_text())]
    doc["customResources"] = [ENCODE, ENCODE_HPA]
    workload.write_text(json.dumps(doc))
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, DEFAULT_LIKE, platform, workload,
        "--scheduler", "python -m sample_schedulers.hpa",
        "--scheduler", f"python {WORKERSETS / 'controller.py'}", "--check-determinism",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    assert "the two runs wrote the same bytes" in r.stderr
    hpa = [
        line for line in (out / "scheduler-1.log").read_text().splitlines() if "New size" in line
    ]
    assert [line.split(" hpa INFO ")[1] for line in hpa] == [
        "default/encode: New size: 2; reason: cpu resource utilization (percentage of request) (was 1)",
        "default/encode: New size: 4; reason: cpu resource utilization (percentage of request) (was 2)",
    ]
    assert [line.split(",")[0][-8:] for line in hpa] == ["00:05:00", "00:10:00"]
    assert (out / "scheduler-2.log").read_text().splitlines() == [
        "t=0s workerset encode: 0 -> 1 pods",
        "t=300s workerset encode: 1 -> 2 pods",
        "t=600s workerset encode: 2 -> 4 pods",
    ]
    with open(out / "out_decisions.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    binds = [r["time"] for r in rows if r["name"].startswith("encode-")]
    assert binds == ["0", "300", "600", "600"]
    scales = [
        (r["time"], r["actor"], r["kind"], r["target"], r["detail"])
        for r in rows
        if r["action"] == "scale"
    ]
    assert scales == [
        ("300", "scheduler-1", "WorkerSet", "2", "from 1"),
        ("600", "scheduler-1", "WorkerSet", "4", "from 2"),
    ]
