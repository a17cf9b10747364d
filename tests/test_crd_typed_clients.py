"""CustomResourceDefinitions through the typed models of every client generation the
project supports (issue 26): the official client (newest and 24.2.0, ``.venv/k8s24``),
kubernetes_asyncio, and kopf, which watches the CRDs to find its resources. Each answer
must deserialise into ``V1CustomResourceDefinition``: the server writes what
kube-apiserver writes (``conversion.strategy``, every version's ``served`` and
``storage``, the status' ``acceptedNames``, ``storedVersions`` and conditions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from broker.facade import Facade, ManualClock
from broker.facade.crds import CRD_KEY

ROOT = Path(__file__).resolve().parent.parent
OLD_CLIENT = ROOT / ".venv" / "k8s24"
PROGRAMS = ROOT / "tests" / "programs"
CONDITIONS = [["Established", "True", "InitialNamesAccepted"], ["NamesAccepted", "True", "NoConflicts"]]  # fmt: skip


@pytest.fixture
def facade():
    f = Facade(ManualClock()).start()
    yield f
    f.stop()


def _run(facade, tmp_path, env, program: str) -> dict:
    kubeconfig = facade.write_kubeconfig(tmp_path / "kc", "typed")
    proc = subprocess.run(
        [sys.executable, str(PROGRAMS / program), str(kubeconfig)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _described(generation: int, printer: list[str]) -> dict:
    return {
        "model": "V1CustomResourceDefinition",
        "generation": generation,
        "conditions": CONDITIONS,
        "times": True,
        "accepted": ["gadgets", "gadget", "Gadget", "GadgetList", ["gd"]],
        "stored": ["v1"],
        "conversion": "None",
        "version": ["v1", True, True],
        "printer": printer,
        "size_default": 1,
    }


@pytest.mark.parametrize("version", ["newest", "24"])
def test_crds_round_trip_through_both_official_client_generations(
    facade, tmp_path, subprocess_env, version
):
    env = dict(subprocess_env)
    if version == "24":
        if not (OLD_CLIENT / "kubernetes").is_dir():
            pytest.skip("run scripts/setup-venv.sh: .venv/k8s24 missing")
        env["PYTHONPATH"] = os.pathsep.join([str(OLD_CLIENT), str(ROOT)])
    seen = _run(facade, tmp_path, env, "crd_typed_client.py")
    assert seen.pop("version").startswith("24.") == (version == "24")
    # a CRD's DELETE answers the object (as kube-apiserver does), which each generation
    # reads as its V1Status model or, failing that, as a dict
    assert seen.pop("deleted") in ("V1Status", "dict")
    assert seen == {
        "created": _described(1, ["Size"]),
        "read": _described(1, ["Size"]),
        "read_status": _described(1, ["Size"]),
        "listed": ["V1CustomResourceDefinitionList", ["gadgets.typed.example.com"]],
        "patched": [2, ["gd", "gdt"]],
        "watched": [["MODIFIED", "V1CustomResourceDefinition", ["v1"]]],
        "replaced": [3, ["Size", "Color"]],
        "replaced_fresh": [4, CONDITIONS, "Gadget"],
        "status_replaced": ["typed.example.com", ["v1"]],
        "status_patched": ["v1"],
        "object_created": [{"replicas": 2, "size": 1}, 1],
        "object_replaced": [{"replicas": 2, "size": 3, "color": "red"}, 3],
        "object_status": [{"replicas": 2}, 3],
        "object_scale": ["Scale", {"replicas": 4}, {"replicas": 2}],
        "objects_listed": ["g"],
        "object_invalid": [
            422,
            'Gadget.typed.example.com "bad" is invalid: spec.color: Unsupported value: '
            '"green": supported values: "red", "blue"',
        ],
        "objects_watched": [["DELETED", "g"]],
        "widgets": [["v1", True, True], ["v1beta1", False, False], "WidgetList"],
        "absent": 404,
        "after_delete": [],
        "collection_deleted": "V1Status",
        "after_collection": [],
    }


def test_kubernetes_asyncio_round_trips_crds_into_its_typed_models(
    facade, tmp_path, subprocess_env
):
    seen = _run(facade, tmp_path, subprocess_env, "aio_crd.py")
    conditions = [["Established", "True"], ["NamesAccepted", "True"]]
    described = ["V1CustomResourceDefinition", 1, conditions, ["sprocket", "SprocketList"], ["v1"], "None"]  # fmt: skip
    assert seen == {
        "created": described,
        "read": described,
        "listed": ["V1CustomResourceDefinitionList", ["sprockets.aio.example.com"]],
        "watched": [["MODIFIED", "V1CustomResourceDefinition", 2]],
        "replaced": [*described[:1], 2, *described[2:]],
        "status": [*described[:1], 2, *described[2:]],
        "object": {"teeth": 12},
        "after_delete": [],
    }


def test_a_crd_without_served_or_storage_stores_them_false_and_serves_nothing_unserved(facade):
    """Go's bools have no ``omitempty``: an omitted ``served`` is false (the version is
    not served, and needs no schema), and both are written out."""
    s = requests.Session()
    s.trust_env = False
    s.headers["Authorization"] = f"Bearer {facade.add_token('t')}"
    url = facade.url + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "dials.knob.example.com"},
        "spec": {
            "group": "knob.example.com",
            "scope": "Namespaced",
            "names": {"plural": "dials", "kind": "Dial"},
            "versions": [
                {"name": "v1", "storage": True, "served": True,
                 "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v2"},
            ],
        },
    }  # fmt: skip
    r = s.post(url, json=body)
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["spec"]["conversion"] == {"strategy": "None"}
    assert made["spec"]["versions"][1] == {"name": "v2", "served": False, "storage": False}
    assert made["status"]["storedVersions"] == ["v1"]
    assert s.get(facade.url + "/apis/knob.example.com/v1/namespaces/default/dials").ok
    r = s.get(facade.url + "/apis/knob.example.com/v2/namespaces/default/dials")
    assert r.status_code == 404


def test_a_kopf_operator_finds_its_kind_when_its_crd_appears(facade, tmp_path, subprocess_env):
    """kopf is started before the Lamps' CRD exists; it watches the CRDs and, on the
    Lamps' one, re-discovers the group, then handles the Lamp."""
    from kubernetes import client, config

    env = dict(subprocess_env, KUBECONFIG=str(facade.write_kubeconfig(tmp_path / "kc", "kopf")))
    kopf = Path(sys.executable).parent / "kopf"
    proc = subprocess.Popen(
        [str(kopf), "run", "--standalone", "--namespace", "default",
         str(PROGRAMS / "kopf_late_crd.py")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    changed = threading.Event()
    facade.store.add_listener(lambda *args: changed.set())
    lamp = None
    try:
        # wait for kopf's watch of the CRDs (bounded: ~60 s on a loaded machine), so
        # that the CRD made next reaches kopf as an event, not in its first scan
        for _ in range(600):
            if facade.store.watcher_count(CRD_KEY) or proc.poll() is not None:
                break
            changed.wait(0.1)
        assert facade.store.watcher_count(CRD_KEY) == 1
        api = config.new_client_from_config(str(env["KUBECONFIG"]))
        crd = json.loads((PROGRAMS / "workerpools" / "crd.json").read_text())
        crd["metadata"]["name"] = "lamps.light.example.com"
        crd["spec"].update(group="light.example.com", names={"plural": "lamps", "kind": "Lamp"})
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True,
        }  # fmt: skip
        client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "light.example.com", "v1", "default", "lamps",
            {"apiVersion": "light.example.com/v1", "kind": "Lamp",
             "metadata": {"name": "desk"}, "spec": {"watts": 40}},
        )  # fmt: skip
        api.close()
        for _ in range(600):
            lamp = facade.store.get("lamps.light.example.com", "default", "desk")
            if (lamp.get("status") or {}).get("switch_on") or proc.poll() is not None:
                break
            changed.clear()
            changed.wait(0.1)
    finally:
        proc.terminate()
        log = proc.communicate(timeout=60)[0]
    assert (lamp.get("status") or {}).get("switch_on") == {"on": True, "watts": 40}, log[-3000:]


def _two_versions(s: requests.Session, url: str, storage: str) -> requests.Response:
    version = {"served": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "dials.knob.example.com"},
        "spec": {
            "group": "knob.example.com",
            "scope": "Namespaced",
            "names": {"plural": "dials", "kind": "Dial"},
            "versions": [
                {"name": "v1", "storage": storage == "v1", **version},
                {"name": "v2", "storage": storage == "v2", **version},
            ],
        },
    }
    got = s.get(url + "/dials.knob.example.com")
    if got.status_code == 404:
        return s.post(url, json=body)
    body["metadata"]["resourceVersion"] = got.json()["metadata"]["resourceVersion"]
    return s.put(url + "/dials.knob.example.com", json=body)


def test_stored_versions_grow_and_guard_the_versions_still_stored(facade):
    """The storage version joins ``status.storedVersions``; a version listed there may
    not leave ``spec.versions`` until a status write (a storage migration) drops it; a
    status write must keep the storage version (422s as kube-apiserver words them)."""
    s = requests.Session()
    s.trust_env = False
    s.headers["Authorization"] = f"Bearer {facade.add_token('t')}"
    url = facade.url + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert _two_versions(s, url, "v1").status_code == 201
    r = _two_versions(s, url, "v2")
    assert r.json()["status"]["storedVersions"] == ["v1", "v2"]
    crd = r.json()
    crd["spec"]["versions"] = crd["spec"]["versions"][1:]
    r = s.put(url + "/dials.knob.example.com", json=crd)
    assert r.status_code == 422
    assert r.json()["message"] == (
        'CustomResourceDefinition.apiextensions.k8s.io "dials.knob.example.com" is invalid: '
        'status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was '
        "previously a storage version, and must remain in spec.versions until a storage "
        "migration ensures no data remains persisted in v1 and removes v1 from "
        "status.storedVersions"
    )
    status = s.get(url + "/dials.knob.example.com/status").json()
    status["status"]["storedVersions"] = ["v1"]
    r = s.put(url + "/dials.knob.example.com/status", json=status)
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0]["message"] == (
        'Invalid value: []string{"v1"}: must have the storage version v2'
    )
    # the migration done: v1 leaves storedVersions, then spec.versions
    status["status"]["storedVersions"] = ["v2"]
    assert s.put(url + "/dials.knob.example.com/status", json=status).status_code == 200
    del crd["metadata"]["resourceVersion"]
    r = s.put(url + "/dials.knob.example.com", json=crd)
    assert r.status_code == 200, r.text
    assert [v["name"] for v in r.json()["spec"]["versions"]] == ["v2"]
    assert (
        s.get(facade.url + "/apis/knob.example.com/v1/namespaces/default/dials").status_code == 404
    )


def test_a_status_write_keeps_what_the_crd_controllers_own(facade):
    """acceptedNames and the NamesAccepted/Established conditions are the controllers'
    (they would write them back at once): a status write that drops them keeps them, and
    the kind stays served; a condition of the writer's own is kept beside them."""
    s = requests.Session()
    s.trust_env = False
    s.headers["Authorization"] = f"Bearer {facade.add_token('t')}"
    url = facade.url + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    assert _two_versions(s, url, "v1").status_code == 201
    before = s.get(url + "/dials.knob.example.com").json()["status"]
    mine = {"type": "Reviewed", "status": "True"}
    r = s.patch(
        url + "/dials.knob.example.com/status",
        json={"status": {"conditions": [mine], "acceptedNames": None, "storedVersions": []}},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    after = r.json()["status"]
    assert after["acceptedNames"] == before["acceptedNames"]
    assert after["conditions"] == [*before["conditions"], mine]
    assert after["storedVersions"] == ["v1"]  # an empty list defaults to the storage version
    assert s.get(facade.url + "/apis/knob.example.com/v1/namespaces/default/dials").ok
