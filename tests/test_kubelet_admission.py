"""broker.cluster.kubelet_admission: the checks a real kubelet makes when a bound pod reaches it
(pkg/kubelet/lifecycle/predicate.go), each named after what the real one does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.cluster import kubelet_admission as admission
from broker.cluster.kubelet_admission import NodeView, admit, pod_requests


def pod(requests=None, *, limits=None, labels=None, **spec):
    container = {"name": "c", "image": "i", "resources": {}}
    if requests is not None:
        container["resources"]["requests"] = requests
    if limits is not None:
        container["resources"]["limits"] = limits
    return {
        "metadata": {"name": "p", "namespace": "default", "labels": labels or {}},
        "spec": {"containers": [container], **spec},
    }


def node(allocatable=None, used=None, *, labels=None, taints=None, ports=()):
    alloc = {"cpu": 2000, "memory": 4 << 30, "pods": 110, **(allocatable or {})}
    return NodeView("n1", labels or {"kubernetes.io/hostname": "n1"}, taints or [], alloc,
                    used or {}, list(ports))  # fmt: skip


def refusal(p, n):
    return admit(p, pod_requests(p), n)


# --------------------------------------------------------------------------- resources


def test_a_pod_that_fits_is_admitted():
    assert refusal(pod({"cpu": "2", "memory": "4Gi"}), node()) is None


def test_cpu_is_counted_in_millicores_and_refused_as_OutOfcpu_with_the_kubelet_message():
    r = refusal(pod({"cpu": "500m"}), node(used={"cpu": 1600, "pods": 2}))
    assert r.reason == "OutOfcpu"
    assert r.message == (
        "Node didn't have enough resource: cpu, requested: 500, used: 1600, capacity: 2000"
    )
    assert r.status_message == "Pod was rejected: " + r.message


def test_the_pod_count_is_checked_first_and_refused_as_OutOfpods():
    full = node({"pods": 3}, used={"pods": 3, "cpu": 2000})
    r = refusal(pod({"cpu": "1"}), full)  # cpu is short too: pods is reported
    assert r.reason == "OutOfpods"
    assert r.message.endswith("pods, requested: 1, used: 3, capacity: 3")


def test_a_pod_without_requests_still_needs_a_pod_slot():
    assert refusal(pod(), node({"pods": 1}, used={"pods": 1})).reason == "OutOfpods"
    assert refusal(pod(), node({"pods": 1})) is None


def test_every_requested_resource_is_checked_extended_ones_by_their_own_name():
    gpus = node({"nvidia.com/gpu": 4}, used={"nvidia.com/gpu": 3, "pods": 1})
    r = refusal(pod({"nvidia.com/gpu": "2"}, limits={"nvidia.com/gpu": "2"}), gpus)
    assert r.reason == "OutOfnvidia.com/gpu"
    assert r.message.endswith("nvidia.com/gpu, requested: 2, used: 3, capacity: 4")
    assert refusal(pod({"nvidia.com/gpu": "1"}), gpus) is None


def test_an_extended_resource_the_node_does_not_have_at_all_is_not_checked():
    """removeMissingExtendedResources: cluster-level resources are unknown to nodes, so
    the kubelet admits a GPU pod bound to a node without GPUs (the scheduler would not
    have put it there)."""
    assert refusal(pod({"nvidia.com/gpu": "1"}), node()) is None
    # ...but a native resource the node lacks is checked against 0
    r = refusal(pod({"hugepages-2Mi": "2Mi"}), node())
    assert r.reason == "OutOfhugepages-2Mi"


def test_cpu_then_memory_then_ephemeral_storage_then_others_by_name():
    tight = node({"cpu": 0, "memory": 0, "ephemeral-storage": 0, "a.io/x": 0, "b.io/y": 0})
    p = pod({"b.io/y": "1", "a.io/x": "1", "ephemeral-storage": "1", "memory": "1", "cpu": "1"})
    reasons = [r.reason for r in admission.general_filter(p, pod_requests(p), tight)]
    assert reasons == [
        "OutOfcpu",
        "OutOfmemory",
        "OutOfephemeral-storage",
        "OutOfa.io/x",
        "OutOfb.io/y",
    ]


def test_effective_requests_sum_containers_and_take_the_larger_init_container():
    p = pod({"cpu": "1", "memory": "1Gi"})
    p["spec"]["containers"].append(
        {"name": "d", "image": "i", "resources": {"requests": {"cpu": "250m"}}}
    )
    p["spec"]["initContainers"] = [
        {"name": "init", "image": "i", "resources": {"requests": {"cpu": "2", "memory": "1"}}}
    ]
    assert pod_requests(p) == {"cpu": 2000, "memory": 1 << 30}


def test_a_sidecar_adds_to_the_containers_and_runs_beside_later_init_containers():
    p = pod({"cpu": "1"})
    p["spec"]["initContainers"] = [
        {"name": "side", "image": "i", "restartPolicy": "Always",
         "resources": {"requests": {"cpu": "500m"}}},
        {"name": "init", "image": "i", "resources": {"requests": {"cpu": "1800m"}}},
    ]  # fmt: skip
    assert pod_requests(p) == {"cpu": 2300}  # max(1 + 0.5, 1.8 + 0.5)
    p["spec"]["overhead"] = {"cpu": "100m"}
    assert pod_requests(p) == {"cpu": 2400}


def test_quantities_round_up_to_the_kubelet_unit_and_malformed_ones_count_as_none():
    assert pod_requests(pod({"cpu": "0.0001", "memory": "0.5"})) == {"cpu": 1, "memory": 1}
    assert pod_requests(pod({"cpu": "abc", "memory": [1]})) == {}
    assert pod_requests({"spec": {"containers": "x"}}) == {}


# --------------------------------------------------------------------------- placement


def test_node_selector_must_match_every_pair():
    n = node(labels={"env": "prod", "disk": "ssd"})
    assert refusal(pod(nodeSelector={"env": "prod"}), n) is None
    r = refusal(pod(nodeSelector={"env": "prod", "disk": "hdd"}), n)
    assert (r.reason, r.message) == ("NodeAffinity", "Predicate NodeAffinity failed")


def _required(*terms):
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": list(terms)}}
    }  # fmt: skip


@pytest.mark.parametrize(
    ("expression", "admitted"),
    [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
        ({"key": "gpu", "operator": "NotIn", "values": ["x"]}, True),  # absent: matches
        ({"key": "zone", "operator": "Exists"}, True),
        ({"key": "gpu", "operator": "DoesNotExist"}, True),
        ({"key": "cores", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "cores", "operator": "Lt", "values": ["4"]}, False),
        ({"key": "zone", "operator": "Gt", "values": ["1"]}, False),  # not an integer
        ({"key": "zone", "operator": "In", "values": []}, False),  # malformed term
        ({"key": "zone", "operator": "Exists", "values": ["a"]}, False),  # malformed
        ({"key": "zone", "operator": "Near", "values": ["a"]}, False),
    ],
)
def test_required_node_affinity_operators(expression, admitted):
    n = node(labels={"zone": "a", "cores": "8"})
    p = pod(affinity=_required({"matchExpressions": [expression]}))
    assert (refusal(p, n) is None) is admitted


def test_required_node_affinity_terms_are_ored_and_an_empty_term_matches_nothing():
    n = node(labels={"zone": "a"})
    miss = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
    hit = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    assert refusal(pod(affinity=_required(miss, hit)), n) is None
    assert refusal(pod(affinity=_required({})), n).reason == "NodeAffinity"
    by_name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    assert refusal(pod(affinity=_required(by_name)), n) is None
    other = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    assert refusal(pod(affinity=_required(other)), n).reason == "NodeAffinity"


def test_preferred_affinity_and_pod_affinity_are_the_schedulers_business():
    preferred = {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["b"]}]}}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}]},
    }  # fmt: skip
    assert refusal(pod(affinity=preferred), node(labels={"zone": "a"})) is None


def test_only_NoExecute_taints_refuse_a_pod_NoSchedule_is_left_to_the_scheduler():
    soft = node(taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                        {"key": "x", "effect": "PreferNoSchedule"}])  # fmt: skip
    assert refusal(pod(), soft) is None
    hard = node(taints=[{"key": "maintenance", "effect": "NoExecute"}])
    r = refusal(pod(), hard)
    assert (r.reason, r.message) == ("TaintToleration", "Predicate TaintToleration failed")


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute"}, True),
        ({"key": "k", "value": "v"}, True),  # Equal is the default, no effect: all
        ({"key": "k", "value": "w"}, False),
        ({"key": "k", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),  # no key with Exists: every taint
        ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_tolerations_match_taints_as_the_real_helper_does(toleration, tolerated):
    n = node(taints=[{"key": "k", "value": "v", "effect": "NoExecute"}])
    assert (refusal(pod(tolerations=[toleration]), n) is None) is tolerated


def test_a_host_port_in_use_refuses_the_pod():
    p = pod()
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    used = node(ports=[("0.0.0.0", "TCP", 8080)])
    r = refusal(p, used)
    assert (r.reason, r.message) == ("NodePorts", "Predicate NodePorts failed")
    assert refusal(p, node(ports=[("0.0.0.0", "UDP", 8080)])) is None
    assert refusal(p, node(ports=[("0.0.0.0", "TCP", 8081)])) is None
    p["spec"]["containers"][0]["ports"][0]["hostIP"] = "10.0.0.1"
    assert refusal(p, node(ports=[("10.0.0.2", "TCP", 8080)])) is None
    assert refusal(p, used).reason == "NodePorts"  # 0.0.0.0 takes every address


def test_a_pod_bound_elsewhere_is_refused_as_NodeName():
    assert refusal(pod(nodeName="n2"), node()).reason == "NodeName"


def test_the_os_label_and_the_os_field_come_first():
    full = node({"pods": 0})
    r = refusal(pod(labels={"kubernetes.io/os": "windows"}), full)
    assert r.reason == "PodOSSelectorNodeLabelDoesNotMatch"
    assert refusal(pod(os={"name": "windows"}), full).reason == "PodOSNotSupported"
    assert refusal(pod(labels={"kubernetes.io/os": "linux"}), node()) is None


@given(
    st.dictionaries(
        st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "ephemeral-storage"]),
        st.integers(0, 8),
    ),
    st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.integers(0, 8)),
)
def test_admitted_iff_every_listed_resource_and_a_pod_slot_fit(allocatable, want):
    n = NodeView("n1", {}, [], allocatable, {})
    requests = {k: v for k, v in want.items() if v}
    refused = admit({"spec": {}}, requests, n)
    checked = {k: v for k, v in requests.items() if k in allocatable or k != "nvidia.com/gpu"}
    fits = allocatable.get("pods", 0) >= 1 and all(
        v <= allocatable.get(k, 0) for k, v in checked.items()
    )
    assert (refused is None) is fits
