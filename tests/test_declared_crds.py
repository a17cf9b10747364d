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
    from commands import simulate
    from simulator.workload import Workload

    path = _workload(tmp_path, [crontab_crd()], [crontab("Bad_Name")])
    with pytest.raises(simulate._Refused, match=r"customResources\[0\].metadata.name"):
        simulate._declared([Workload("w", path, [])])
