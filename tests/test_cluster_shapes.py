"""The cluster shapes inputs can say (issue 19 #4) and their checks up front (issue 17
#2, #12): host properties → Nodes, job/profile fields → Pods, pods that can never run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.cluster.input_check import InputError, check_inputs
from broker.cluster.node_shape import build_node, node_shape, parse_labels, parse_taints
from broker.cluster.pod_shape import build_pod, check_fields
from broker.k8s.shape_rules import ShapeError
from simulator.platform import load_platform
from simulator.testing import write_platform
from simulator.workload import load_workload

ROOT = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------- nodes


def test_host_properties_become_labels_taints_cordon_and_allocatable():
    shape = node_shape(
        {
            "role": "",
            "core": "4",
            "labels": "env=prod,topology.kubernetes.io/zone=a",
            "taints": "dedicated=gpu:NoSchedule,maintenance:NoExecute",
            "unschedulable": "true",
            "allocatable": "memory=8Gi,nvidia.com/gpu=4,pods=20,example.com/fpga=1",
            "node_class": "gpu",
        }
    )
    node = build_node("n1", shape, "10.0.0.1", 3)
    labels = node["metadata"]["labels"]
    assert labels["env"] == "prod" and labels["topology.kubernetes.io/zone"] == "a"
    assert labels["timewarp.io/node-class"] == "gpu"  # other props: as before
    assert node["spec"]["unschedulable"] is True
    assert node["spec"]["taints"] == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
        {"key": "maintenance", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
    ]
    assert node["status"]["allocatable"] == {
        "cpu": "4",
        "memory": "8Gi",
        "pods": "20",
        "ephemeral-storage": "100Gi",
        "nvidia.com/gpu": "4",
        "example.com/fpga": "1",
    }
    assert node["status"]["capacity"] == node["status"]["allocatable"]
    assert shape.amounts()["cpu"] == 4000 and shape.amounts()["memory"] == 8 << 30


def test_a_plain_host_is_the_node_it_always_was():
    node = build_node("n1", node_shape({"core": "2", "gpu": "1"}), "10.0.0.1", 0)
    assert node["spec"] == {}
    assert node["status"]["allocatable"] == {
        "cpu": "2",
        "memory": "4Gi",
        "pods": "110",
        "ephemeral-storage": "100Gi",
        "nvidia.com/gpu": "1",
    }


@pytest.mark.parametrize(
    ("props", "field", "words"),
    [
        ({"labels": "env"}, "labels", "expected key=value"),
        ({"labels": "env=prod,"}, "labels", "an empty item"),
        ({"labels": "Bad Key=1"}, "labels", "key 'Bad Key'"),
        ({"labels": "env=not ok"}, "labels", "a valid label must be"),
        ({"labels": "a=1,a=2"}, "labels", "given twice"),
        ({"taints": "dedicated=gpu"}, "taints", "expected key[=value]:Effect"),
        ({"taints": "dedicated=gpu:NoScheduleX"}, "taints", "unsupported taint effect"),
        ({"taints": "a:NoSchedule,a=b:NoSchedule"}, "taints", "given twice"),
        ({"unschedulable": "yes"}, "unschedulable", "is not true or false"),
        ({"allocatable": "cpu"}, "allocatable", "expected resource=quantity"),
        ({"allocatable": "cpu=abc"}, "allocatable: cpu", "quantities must match"),
        ({"allocatable": "gpu=1"}, "allocatable", "must be a standard resource for nodes"),
        ({"allocatable": "nvidia.com/gpu=1.5"}, "allocatable: nvidia.com/gpu", "integer"),
        ({"allocatable": "pods=-1"}, "allocatable: pods", "greater than or equal to 0"),
        ({"core": "abc"}, "core", "quantities must match"),
        ({"core": "2", "allocatable": "cpu=4"}, "allocatable", "cpu is given twice"),
    ],
)
def test_bad_host_properties_are_refused_naming_the_property(props, field, words):
    with pytest.raises(ShapeError) as caught:
        node_shape(props)
    assert caught.value.field == field and words in caught.value.message


_key = st.from_regex(
    r"[a-z][a-z0-9]{0,8}(\.[a-z]{2,5})?/[a-z][-a-z0-9]{0,10}[a-z0-9]", fullmatch=True
)
_value = st.from_regex(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?", fullmatch=True)


@given(st.dictionaries(_key, _value, min_size=1, max_size=5))
def test_labels_round_trip_kubectl_syntax(labels):
    text = ",".join(f"{k}={v}" for k, v in labels.items())
    assert parse_labels(text) == labels


@given(st.lists(st.tuples(_key, _value, st.sampled_from(["NoSchedule", "NoExecute"])),
                unique_by=lambda t: (t[0], t[2]), max_size=4))  # fmt: skip
def test_taints_round_trip_kubectl_syntax(taints):
    text = ",".join(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in taints)
    expected = [{"key": k, "effect": e, **({"value": v} if v else {})} for k, v, e in taints]
    assert parse_taints(text) == expected


# --------------------------------------------------------------------------- pods


def test_requests_limits_and_a_partial_pod_make_the_pod():
    profile = {
        "type": "delay",
        "delay": 1,
        "cpu": "500m",
        "limits": {"cpu": "1", "memory": "1Gi"},
        "pod": {"spec": {"securityContext": {"runAsNonRoot": True}}},
    }
    job = {
        "id": "1",
        "requests": {"nvidia.com/gpu": 2, "memory": "512Mi"},
        "labels": {"team": "a"},
        "pod": {
            "metadata": {"labels": {"tier": "batch"}},
            "spec": {
                "containers": [{"env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}]},
                               {"name": "side", "image": "busybox"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "env", "operator": "In", "values": ["prod"]}]}]}}},
                "securityContext": {"runAsUser": 1000},
            },
        },
    }  # fmt: skip
    check_fields(profile)
    check_fields(job)
    pod = build_pod("w0!1", "w0.1", job, profile)
    main, side = pod["spec"]["containers"]
    assert main["name"] == "main" and main["env"] == [{"name": "A", "value": "1"}]
    assert main["resources"] == {
        "requests": {"cpu": "500m", "memory": "512Mi", "nvidia.com/gpu": "2"},
        "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"},
    }
    assert side == {"name": "side", "image": "busybox"}
    assert pod["metadata"]["labels"] == {"team": "a", "tier": "batch"}
    assert pod["spec"]["securityContext"] == {"runAsNonRoot": True, "runAsUser": 1000}
    assert "nodeAffinity" in pod["spec"]["affinity"]


def test_cpu_defaults_to_one_unless_a_cpu_limit_is_given_which_is_then_the_request():
    assert build_pod("w0!1", "p", {}, {})["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1"}
    }
    pod = build_pod("w0!1", "p", {"limits": {"cpu": "2"}}, {})
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "2"},
        "limits": {"cpu": "2"},
    }


def test_batkube_numbers_stay_quantities_and_memory_zero_means_none():
    pod = build_pod("w0!1", "p", {}, {"cpu": 0.188, "memory": "0"})
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "188m"}}


def test_a_null_in_the_pod_removes_what_timewarp_set():
    pod = build_pod(
        "w0!1", "p", {"nodeSelector": {"a": "b"}, "pod": {"spec": {"nodeSelector": None}}}, {}
    )
    assert "nodeSelector" not in pod["spec"]


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"cpu": "abc"}, "cpu", "quantities must match"),
        ({"cpu": -64}, "cpu", "greater than or equal to 0"),
        ({"cpu": "1e9999999999"}, "cpu", "unable to parse quantity's suffix"),
        ({"requests": [1]}, "requests", "expected an object"),
        ({"requests": {"gpu": 1}}, "requests", "must be a standard resource for containers"),
        ({"requests": {"pods": 1}}, "requests", "must be a standard resource for containers"),
        ({"requests": {"nvidia.com/gpu": "0.5"}}, "requests.nvidia.com/gpu", "must be an integer"),
        ({"cpu": "1", "requests": {"cpu": "2"}}, "cpu", "not both"),
        ({"labels": "app=x"}, "labels", "expected an object"),
        ({"labels": {"app": 1}}, "labels.app", "expected a string"),
        ({"labels": {"bad key": "x"}}, "labels", "name part must consist"),
        ({"annotations": ["x"]}, "annotations", "expected an object"),
        ({"namespace": "Bad_NS"}, "namespace", "RFC 1123 label"),
        ({"nodeSelector": {"env": "a b"}}, "nodeSelector.env", "a valid label"),
        ({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]},
         "tolerations[0].operator", "value must be empty"),
        ({"tolerations": [{"operator": "Equal"}]}, "tolerations[0].operator", "must be Exists"),
        ({"tolerations": [{"key": "k", "tolerationSeconds": 5}]}, "tolerations[0].effect",
         "must be 'NoExecute'"),
        ({"image": " busybox"}, "image", "whitespace"),
        ({"pod": {"status": {}}}, "pod.status", "not settable"),
        ({"pod": {"metadata": {"name": "x"}}}, "pod.metadata.name", "not settable here"),
        ({"pod": {"spec": {"nodeName": "n1"}}}, "pod.spec.nodeName", "Forbidden"),
        ({"pod": {"spec": {"tolerationz": []}}}, "pod.spec.tolerationz", "unknown field"),
        ({"pod": {"spec": {"priority": "high"}}}, "pod.spec.priority", "expected an integer"),
        ({"pod": {"spec": {"containers": [{"imag": "x"}]}}}, "pod.spec.containers[0].imag",
         "unknown field"),
        ({"pod": {"spec": {"containers": [{}, {"name": "b"}]}}}, "pod.spec.containers[1].image",
         "Required value"),
        ({"pod": {"spec": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}]}}}}}},
         "pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
         ".nodeSelectorTerms[0].matchExpressions[0].values[0]", "must be an integer"),
        ({"pod": {"spec": {"topologySpreadConstraints": [
            {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}}},
         "pod.spec.topologySpreadConstraints[0].maxSkew", "greater than zero"),
        ({"pod": {"spec": {"containers": [{"ports": [{"containerPort": 80, "hostPort": 70000}]}]}}},
         "pod.spec.containers[0].ports[0].hostPort", "between 1 and 65535"),
    ],
)  # fmt: skip
def test_bad_pod_fields_are_refused_naming_the_field(fields, field, words):
    with pytest.raises(ShapeError) as caught:
        check_fields(fields)
    assert caught.value.field == field and words in caught.value.message


# --------------------------------------------------------------------------- up front


def _inputs(tmp_path, jobs, profiles=None, props=None, nodes=2, cores=1):
    platform = write_platform(tmp_path / "p.xml", nodes, cores, props=props)
    profiles = profiles or {"p": {"type": "delay", "delay": 10}}
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"nb_res": nodes, "jobs": jobs, "profiles": profiles}))
    plat = load_platform(platform)
    return plat, [load_workload(path, "w0", len(plat.compute))]


def _job(i=0, **fields):
    return {"id": str(i), "subtime": 0, "res": 1, "profile": "p", **fields}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cpu": "8"}, "requests.cpu: can never run: it requests 8 cpu and the largest node "
         "allocatable is 1"),
        ({"requests": {"nvidia.com/gpu": 1}}, "requests.nvidia.com/gpu: can never run: it "
         "requests 1 nvidia.com/gpu and no node has nvidia.com/gpu"),
        ({"requests": {"memory": "5Gi"}}, "requests.memory: can never run"),
        ({"nodeSelector": {"env": "dev"}}, "nodeSelector: can never run: no node has the "
         "labels it requires"),
        ({"pod": {"spec": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In",
                                  "values": ["elsewhere"]}]}]}}}}}},
         "pod.spec.affinity.nodeAffinity: can never run"),
        ({"pod": {"spec": {"os": {"name": "windows"}}}}, "pod.spec.os: can never run"),
    ],
)  # fmt: skip
def test_a_job_that_can_never_run_is_refused_up_front_naming_job_and_field(
    tmp_path, fields, message
):
    plat, workloads = _inputs(tmp_path, [_job(0), _job(7, **fields)])
    with pytest.raises(InputError) as caught:
        check_inputs(plat, workloads)
    assert f"w.json: jobs[1] (id '7').{message}" in str(caught.value)


def test_every_node_tainted_NoExecute_refuses_a_job_that_does_not_tolerate_it(tmp_path):
    taint = {0: {"taints": "drain=now:NoExecute"}, 1: {"taints": "drain=now:NoExecute"}}
    plat, workloads = _inputs(tmp_path, [_job(0)], props=taint)
    with pytest.raises(InputError, match=r"jobs\[0\] \(id '0'\)\.tolerations: can never run: "
                       r"every node has a NoExecute taint .*drain=now:NoExecute"):  # fmt: skip
        check_inputs(plat, workloads)
    tolerant = _job(0, tolerations=[{"key": "drain", "operator": "Exists"}])
    check_inputs(*_inputs(tmp_path, [tolerant], props=taint))


def test_resources_and_labels_on_different_nodes_never_fit_together(tmp_path):
    props = {0: {"labels": "env=prod"}, 1: {"allocatable": "nvidia.com/gpu=1"}}
    job = _job(0, nodeSelector={"env": "prod"}, requests={"nvidia.com/gpu": 1})
    with pytest.raises(InputError, match="no single node"):
        check_inputs(*_inputs(tmp_path, [job], props=props))


def test_what_a_scheduler_may_still_place_passes(tmp_path):
    """NoSchedule taints and cordoned nodes are the scheduler's business."""
    props = {0: {"taints": "a=b:NoSchedule"}, 1: {"unschedulable": "true"}}
    check_inputs(*_inputs(tmp_path, [_job(0, cpu="1")], props=props))


def test_a_job_over_several_nodes_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"jobs\[0\] \(id '0'\)\.res: .*res must be 1, got 2"):
        check_inputs(*_inputs(tmp_path, [{**_job(0), "res": 2}]))


def test_bad_profile_and_host_fields_name_file_and_field(tmp_path):
    plat, workloads = _inputs(tmp_path, [_job(0)], {"p": {"type": "delay", "delay": 1, "cpu": "x"}})
    with pytest.raises(InputError, match=r"w\.json: profiles\.p\.cpu: 'x': quantities must"):
        check_inputs(plat, workloads)
    plat, workloads = _inputs(tmp_path, [_job(0)], props={1: {"taints": "a:Never"}})
    with pytest.raises(InputError, match=r"p\.xml: <host id='n001'>: prop taints: 'a:Never'"):
        check_inputs(plat, workloads)


def test_simulate_exits_2_naming_file_and_field_before_writing_anything(tmp_path, subprocess_env):
    plat, _ = _inputs(tmp_path, [_job(0)])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"nb_res": 2, "jobs": [_job(3, labels={"app": 5})],
                               "profiles": {"p": {"type": "delay", "delay": 1}}}))  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--scheduler", "python -c 0",
         "-p", str(tmp_path / "p.xml"), "-w", str(bad), "-o", str(tmp_path / "out")],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "bad.json: jobs[0] (id '3').labels.app: expected a string, got 5" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_every_job_that_can_never_run_is_named_in_one_message(tmp_path):
    jobs = (
        [_job(0)] + [_job(i, cpu="8") for i in range(1, 14)] + [_job(20, nodeSelector={"a": "b"})]
    )
    plat, workloads = _inputs(tmp_path, jobs)
    with pytest.raises(InputError) as caught:
        check_inputs(plat, workloads)
    text = str(caught.value)
    first, _, rest = text.partition("\n")
    assert first.endswith(
        "w.json: jobs[1] (id '1').requests.cpu: can never run: it requests 8 cpu and the largest node allocatable is 1"
    )
    assert rest.startswith("  13 more job(s) can never run either: jobs[2] (id '2').requests.cpu;")
    assert "jobs[11] (id '11').requests.cpu; and 3 more" in rest  # the first ten, then a count
    plat, workloads = _inputs(tmp_path, [_job(0, cpu="8"), _job(20, nodeSelector={"a": "b"})])
    with pytest.raises(InputError) as caught:
        check_inputs(plat, workloads)
    assert str(caught.value).endswith(
        "1 more job(s) can never run either: jobs[1] (id '20').nodeSelector"
    )
