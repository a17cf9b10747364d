"""out_decisions.csv's ``feasible_nodes``, ``node_rank`` and pending rows from the nodes'
buckets (broker/cluster/node_buckets.py) are what a walk of every node gives: the
property below drives a ``DecisionLog`` and a copy whose figures come from that walk (the
computation before the buckets, kept here as the oracle) through random nodes, pods,
bindings, ends, deletions and node updates, and compares every row."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.cluster import kubelet_admission as admission
from broker.cluster.decisions import DecisionLog, no_node_message
from broker.k8s import resource_names as rn

GPU = "nvidia.com/gpu"
NODES = [f"n{i}" for i in range(6)]
PODS = [f"p{i}" for i in range(8)]


class NaiveLog(DecisionLog):
    """The figures by a walk of every node (the code before the buckets). It patches the
    row just written: runs of fewer than ``SPILL_ROWS`` rows (the property's are)."""

    def _view(self, name: str) -> admission.NodeView:
        node = self._nodes[name]
        return admission.NodeView(name, node.labels, node.taints, node.allocatable, node.used)

    def _feasible_names(self, pod: dict[str, Any]) -> list[str]:
        requests = admission.pod_requests(pod)
        return [
            name
            for name in self._nodes
            if not admission.insufficient_resources(requests, self._view(name))
            and admission.check_node_affinity(pod, self._view(name)) is None
            and admission.check_no_execute_taints(pod, self._view(name)) is None
        ]

    def _bind(self, key: tuple[str, str], pod: dict[str, Any], node_name: str) -> None:
        feasible = self._feasible_names(pod)
        node = self._nodes.get(node_name)
        rank = ""
        if node is not None:
            order = sorted(
                feasible,
                key=lambda n: (-self._nodes[n].free(rn.CPU), -self._nodes[n].free(rn.MEMORY), n),
            )
            rank = order.index(node_name) + 1 if node_name in order else ""
        super()._bind(key, pod, node_name)
        row = list(self.rows[-1])
        row[8] = str(len(feasible))
        if node is not None:
            row[9] = str(rank)
        self.rows[-1] = tuple(row)

    def _feasible(self, pod: dict[str, Any]) -> int:
        return len(self._feasible_names(pod))

    def why_no_node(self, pod: dict[str, Any]) -> str:
        requests = admission.pod_requests(pod)
        reasons: dict[str, int] = {}
        fits = 0
        for name, node in self._nodes.items():
            view = self._view(name)
            found = [r.reason for r in admission.insufficient_resources(requests, view)]
            for check in (admission.check_node_affinity, admission.check_no_execute_taints):
                refusal = check(pod, view)
                if refusal is not None:
                    found.append(refusal.reason)
            if node.unschedulable:
                found.append("Unschedulable")
            if not found:
                fits += 1
            for reason in dict.fromkeys(found):
                reasons[reason] = reasons.get(reason, 0) + 1
        return no_node_message(fits, len(self._nodes), reasons)


# --------------------------------------------------------------------------- inputs

HOSTNAME = "kubernetes.io/hostname"
# a label may name its node (the hostname label, or a value that happens to be a name)
labels = st.dictionaries(
    st.sampled_from(["zone", "disk", "kubernetes.io/os", HOSTNAME]),
    st.sampled_from(["a", "b", "n0", "n1"]),
    max_size=3,
)
taint = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["t1", "t2"]),
        "value": st.sampled_from(["", "x"]),
        "effect": st.sampled_from(["NoExecute", "NoSchedule", "PreferNoSchedule"]),
    }
)
_sparse = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.sampled_from(["0", "500m", "1", "1500m", "2"]),
        "memory": st.sampled_from(["0", "1Gi", "2Gi"]),
        "pods": st.sampled_from(["0", "1", "2", "110"]),
        GPU: st.sampled_from(["0", "1", "2"]),
        "example.com/foo": st.sampled_from(["1", "3"]),
        "ephemeral-storage": st.sampled_from(["1Gi"]),
    },
)
_roomy = st.fixed_dictionaries(
    {
        "cpu": st.sampled_from(["1", "2", "4"]),
        "memory": st.sampled_from(["2Gi", "4Gi"]),
        "pods": st.sampled_from(["1", "3", "110", "110"]),
    },
    optional={GPU: st.sampled_from(["1", "2"]), "example.com/foo": st.sampled_from(["1", "3"])},
)
allocatable = st.one_of(_roomy, _roomy, _roomy, _sparse)
node_spec = st.fixed_dictionaries(
    {
        "labels": labels,
        "taints": st.one_of(st.just([]), st.just([]), st.lists(taint, max_size=2)),
        "allocatable": allocatable,
        "unschedulable": st.booleans(),
    }
)
_cpu = st.sampled_from(["0", "100m", "500m", "500m", "1", "1"])
requests = st.one_of(
    st.fixed_dictionaries({"cpu": _cpu}),
    st.fixed_dictionaries({"cpu": _cpu, "memory": st.sampled_from(["512Mi", "1Gi"])}),
    st.fixed_dictionaries(
        {"cpu": _cpu},
        optional={
            "memory": st.sampled_from(["512Mi", "1Gi"]),
            GPU: st.sampled_from(["1", "2"]),
            "example.com/foo": st.sampled_from(["1", "2"]),
            "ephemeral-storage": st.sampled_from(["512Mi"]),
        },
    ),
)
expression = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["zone", "disk"]),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    }
).map(lambda e: {**e, "values": ["a"] if e["operator"] in ("In", "NotIn") else []})
field_expression = st.fixed_dictionaries(
    {
        "key": st.just("metadata.name"),
        "operator": st.sampled_from(["In", "NotIn"]),
        "values": st.lists(st.sampled_from(NODES), min_size=1, max_size=1),
    }
)
term = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": st.lists(expression, max_size=2),
        "matchFields": st.lists(field_expression, max_size=1),
    },
)
toleration = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(["t1", "t2"]),
        "operator": st.sampled_from(["Exists", "Equal"]),
        "value": st.sampled_from(["", "x"]),
        "effect": st.sampled_from(["NoExecute", "NoSchedule"]),
    },
)
pod_spec = st.fixed_dictionaries(
    {
        "requests": requests,
        "nodeSelector": st.one_of(
            st.none(), st.none(), labels, st.fixed_dictionaries({HOSTNAME: st.sampled_from(NODES)})
        ),
        "terms": st.one_of(st.none(), st.none(), st.lists(term, min_size=1, max_size=2)),
        "tolerations": st.one_of(st.just([]), st.lists(toleration, max_size=2)),
    }
)
_bind = st.tuples(st.just("bind"), st.sampled_from(PODS), st.sampled_from([*NODES, "gone"]))
_pod_op = st.tuples(st.just("pod"), st.sampled_from(PODS), pod_spec)
_end = st.tuples(st.just("end"), st.sampled_from(PODS), st.sampled_from(["Succeeded", "Failed"]))
operation = st.one_of(
    st.tuples(st.just("node"), st.sampled_from(NODES), node_spec),
    st.tuples(st.just("delete-node"), st.sampled_from(NODES)),
    _pod_op, _bind, _end, _end,
    st.tuples(st.just("run"), st.sampled_from(PODS), pod_spec, st.sampled_from(NODES)),
    st.tuples(st.just("run"), st.sampled_from(PODS), pod_spec, st.sampled_from(NODES)),
    st.tuples(st.just("delete-pod"), st.sampled_from(PODS)),
)  # fmt: skip
first_nodes = st.lists(
    st.tuples(st.just("node"), st.sampled_from(NODES), node_spec), min_size=1, max_size=6
)


def _node(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {**spec["labels"], **({HOSTNAME: name} if spec.get("hostname") else {})},
        },
        "spec": {"taints": spec["taints"], "unschedulable": spec["unschedulable"]},
        "status": {"allocatable": spec["allocatable"]},
    }


def _pod(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": spec["requests"]}}],
        "tolerations": spec["tolerations"],
    }
    if spec["nodeSelector"] is not None:
        pod_spec["nodeSelector"] = spec["nodeSelector"]
    if spec["terms"] is not None:
        required = {"nodeSelectorTerms": spec["terms"]}
        pod_spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    return {
        "metadata": {"namespace": "default", "name": name},
        "spec": pod_spec,
        "status": {"phase": "Pending"},
    }


def _run(log: DecisionLog, operations: list[tuple]) -> list[tuple[str, ...]]:
    pods: dict[str, dict[str, Any]] = {}
    nodes: set[str] = set()
    for op, name, *rest in operations:
        if op == "node":
            log.on_commit("nodes", "MODIFIED" if name in nodes else "ADDED", _node(name, rest[0]))
            nodes.add(name)
        elif op == "delete-node" and name in nodes:
            nodes.discard(name)
            log.on_commit("nodes", "DELETED", {"metadata": {"name": name}})
        elif op == "run" and name not in pods:  # created and bound at once
            pods[name] = _pod(name, rest[0])
            log.on_commit("pods", "ADDED", pods[name])
            pods[name] = {**pods[name], "spec": {**pods[name]["spec"], "nodeName": rest[1]}}
            log.on_commit("pods", "MODIFIED", pods[name])
        elif op == "pod" and name not in pods:
            pods[name] = _pod(name, rest[0])
            log.on_commit("pods", "ADDED", pods[name])
        elif op == "bind" and name in pods and not pods[name]["spec"].get("nodeName"):
            pods[name] = {**pods[name], "spec": {**pods[name]["spec"], "nodeName": rest[0]}}
            log.on_commit("pods", "MODIFIED", pods[name])
        elif op == "end" and name in pods:
            pods[name] = {**pods[name], "status": {"phase": rest[0]}}
            log.on_commit("pods", "MODIFIED", pods[name])
        elif op == "delete-pod" and name in pods:
            log.on_commit("pods", "DELETED", pods.pop(name))
    log.finish()
    return list(log.rows)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first_nodes, st.lists(operation, min_size=5, max_size=60))
def test_the_buckets_give_the_figures_of_a_walk_of_every_node(nodes, operations):
    operations = nodes + operations

    def make(cls: type[DecisionLog]) -> DecisionLog:
        return cls(lambda: 0.0, 0, lambda pod: "")

    assert _run(make(DecisionLog), operations) == _run(make(NaiveLog), operations)


def test_the_oracle_sees_the_figures_it_pins():
    """The property compares something: a binding's row has a count and a rank."""
    log = NaiveLog(lambda: 0.0, 0, lambda pod: "")
    ops = [
        ("node", "n1", {"labels": {}, "taints": [], "allocatable": {"cpu": "2", "pods": "9"},
                        "unschedulable": False, "hostname": True}),
        ("node", "n0", {"labels": {}, "taints": [], "allocatable": {"cpu": "1", "pods": "9"},
                        "unschedulable": False, "hostname": True}),
        ("pod", "p0", {"requests": {"cpu": "1"}, "nodeSelector": None, "terms": None,
                       "tolerations": []}),
        ("bind", "p0", "n0"),
    ]  # fmt: skip
    (row,) = _run(log, ops)
    assert (row[2], row[8], row[9]) == ("bind", "2", "2")
