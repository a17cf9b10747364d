"""CRDs and custom resources declared in a workload file (``customResourceDefinitions``,
``customResources``): read with where each is, checked as the API would take them
(file and field in the message), created in order in the facade's store, and found by
``timewarp simulate``'s check before anything runs."""

from __future__ import annotations

import json

import pytest
from test_facade_crds import GROUP, SCHEMA, crontab, crontab_crd

from broker.cluster.declared import DeclaredError, check_declared, create_declared
from broker.facade import ManualClock
from broker.facade.store import Store
from simulator.workload import WorkloadError, read_declared_objects


def _workload(tmp_path, crds, objs) -> str:
    path = tmp_path / "w.json"
    doc = {"nb_res": 1, "jobs": [], "profiles": {}}
    doc["customResourceDefinitions"] = crds
    doc["customResources"] = objs
    path.write_text(json.dumps(doc))
    return str(path)


def test_declared_crds_and_their_objects_are_created_in_order(tmp_path):
    crd = crontab_crd(schema={"openAPIV3Schema": SCHEMA})
    path = _workload(tmp_path, [crd], [crontab("a", cronSpec="x")])
    declared = read_declared_objects(path)
    assert [where for where, _ in declared] == [
        f"{path}: customResourceDefinitions[0]",
        f"{path}: customResources[0]",
    ]
    check_declared(declared)
    store = Store(ManualClock())
    create_declared(store, declared)
    made = store.get(f"crontabs.{GROUP}", "default", "a")
    assert made["spec"] == {"cronSpec": "x", "replicas": 1, "mode": "Slow"}  # defaulted


def test_a_declared_object_the_api_would_refuse_is_named_by_file_and_field(tmp_path):
    crd = crontab_crd(schema={"openAPIV3Schema": SCHEMA})
    path = _workload(tmp_path, [crd], [crontab("a", cronSpec="x", replicas=99)])
    with pytest.raises(DeclaredError) as refused:
        check_declared(read_declared_objects(path))
    assert str(refused.value) == (
        f"{path}: customResources[0].spec.replicas: Invalid value: 99: spec.replicas in body "
        "should be less than or equal to 10"
    )
    orphan = _workload(tmp_path, [], [crontab("a", cronSpec="x")])
    with pytest.raises(DeclaredError, match=r"customResources\[0\]: no served type has"):
        check_declared(read_declared_objects(orphan))
    with pytest.raises(WorkloadError, match=r"customResources\[0\].kind: missing"):
        read_declared_objects(_workload(tmp_path, [], [{"apiVersion": "x/v1"}]))


def test_timewarp_simulate_refuses_a_bad_declared_object_before_anything_runs(tmp_path):
    from commands.simulating import checks
    from simulator.workload import Workload

    path = _workload(tmp_path, [crontab_crd()], [crontab("Bad_Name")])
    with pytest.raises(checks.Refused, match=r"customResources\[0\].metadata.name"):
        checks.declared_objects([Workload("w", path, [])])


PROBE = """
import json, sys
from kubernetes import client, config
config.load_kube_config()
got = client.CustomObjectsApi().get_namespaced_custom_object(
    "stable.example.com", "v1", "default", "crontabs", "a")
with open(sys.argv[1], "w") as out:
    out.write(json.dumps(got["spec"]))
import runpy
sys.argv = sys.argv[:1]
runpy.run_module("sample_schedulers.default_like", run_name="__main__")
"""


def test_timewarp_simulate_serves_the_declared_objects_to_the_scheduler(tmp_path, subprocess_env):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    doc = {
        "nb_res": 1,
        "jobs": [{"id": "1", "subtime": 0, "res": 1, "walltime": 100, "profile": "d"}],
        "profiles": {"d": {"type": "delay", "delay": 10, "cpu": "1", "memory": "1Gi"}},
        "customResourceDefinitions": [crontab_crd(schema={"openAPIV3Schema": SCHEMA})],
        "customResources": [crontab("a", cronSpec="x")],
    }
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(doc))
    probe, seen = tmp_path / "probe.py", tmp_path / "seen.json"
    probe.write_text(PROBE)
    scheduler = f"{sys.executable} {probe} {seen}"  # then the scheduler, same process
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--scheduler", scheduler,
         "-p", str(root / "examples" / "inputs" / "cluster16.xml"), "-w", str(workload),
         "-o", str(tmp_path / "out")],
        cwd=root, env=subprocess_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(seen.read_text()) == {"cronSpec": "x", "replicas": 1, "mode": "Slow"}
