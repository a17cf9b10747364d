"""KSE rebalancer: GreedyLB/RefineLB on hand-computed examples, MAE, snapshot, rounds, binding."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client
from simrun import run_simulate

from sample_schedulers.kse_rebalancer.balancers import (
    PodLoad,
    greedy_lb,
    moves,
    node_loads,
    refine_lb,
)
from sample_schedulers.kse_rebalancer.binder import Binder, TargetBook
from sample_schedulers.kse_rebalancer.imbalance import ImbalanceLog, mae, spread
from sample_schedulers.kse_rebalancer.rebalancer import Rebalancer
from sample_schedulers.kse_rebalancer.snapshot import take_snapshot

# -- the balancers, by hand -------------------------------------------------------------------


def test_greedy_places_heaviest_first_on_the_least_loaded_node():
    pods = [
        PodLoad("a", "n1", 7),
        PodLoad("b", "n1", 5),
        PodLoad("c", "n1", 4),
        PodLoad("d", "n1", 3),
        PodLoad("e", "n1", 1),
    ]
    plan = greedy_lb(pods, {"n1": 0.0, "n2": 0.0})
    # a->n1 (7), b->n2 (5), c->n2 (9), d->n1 (10), e->n2 (10)
    assert plan == {"a": "n1", "b": "n2", "c": "n2", "d": "n1", "e": "n2"}
    assert node_loads(pods, {"n1": 0.0, "n2": 0.0}, plan) == {"n1": 10.0, "n2": 10.0}


def test_greedy_counts_residual_load():
    pods = [PodLoad("a", "n1", 3), PodLoad("b", "n1", 2)]
    plan = greedy_lb(pods, {"n1": 5.0, "n2": 0.0})
    assert plan == {"a": "n2", "b": "n2"}  # n2: 0 -> 3 -> 5, n1 keeps its residual 5


def example():
    pods = [
        PodLoad("a", "n1", 6),
        PodLoad("b", "n1", 3),
        PodLoad("c", "n1", 1),
        PodLoad("d", "n2", 2),
        PodLoad("e", "n3", 3),
    ]
    return pods, {"n1": 0.0, "n2": 0.0, "n3": 0.0}  # loads 10, 2, 3; avg 5


def test_refine_overload_1_moves_the_best_fitting_pods_off_the_heavy_node():
    pods, residual = example()
    plan = refine_lb(pods, residual, overload=1.0)
    # heavy n1 (10 > 5); b fills n2 to exactly 5; then c brings n3 to 4; a fits nowhere
    assert [(p.key, target) for p, target in moves(plan, pods)] == [("b", "n2"), ("c", "n3")]
    assert node_loads(pods, residual, plan) == {"n1": 6.0, "n2": 5.0, "n3": 4.0}


def test_refine_overload_1_2_fills_up_to_avg_times_overload():
    pods, residual = example()
    plan = refine_lb(pods, residual, overload=1.2)
    # cap 6: b -> n3 (3+3 = 6), then n1 = 7 > 6 still heavy: c -> n2 (3); n1 = 6 not heavy
    assert {p.key: t for p, t in moves(plan, pods)} == {"b": "n3", "c": "n2"}
    assert node_loads(pods, residual, plan) == {"n1": 6.0, "n2": 3.0, "n3": 6.0}


def test_refine_leaves_a_balanced_cluster_alone():
    pods = [PodLoad("a", "n1", 5), PodLoad("b", "n2", 5.5)]
    assert moves(refine_lb(pods, {"n1": 0.0, "n2": 0.0}, overload=1.2), pods) == []


def test_refine_rejects_an_overload_below_one():
    with pytest.raises(ValueError, match="overload"):
        refine_lb([], {"n1": 0.0}, overload=0.9)


def test_mae_and_spread_by_hand():
    assert mae({"n1": 10, "n2": 2, "n3": 3}) == pytest.approx(10 / 3)
    assert mae({"n1": 6, "n2": 5, "n3": 4}) == pytest.approx(2 / 3)
    assert spread({"n1": 10, "n2": 2, "n3": 3}) == 8
    assert mae({}) == 0.0


cluster_inputs = st.tuples(
    st.lists(st.floats(0, 1000), min_size=1, max_size=5),  # residual per node
    st.lists(st.tuples(st.integers(0, 4), st.floats(0.001, 500)), max_size=20),
)


def build(inputs):
    residuals, pod_specs = inputs
    residual = {f"n{i}": r for i, r in enumerate(residuals)}
    pods = [
        PodLoad(f"p{j}", f"n{node % len(residuals)}", load)
        for j, (node, load) in enumerate(pod_specs)
    ]
    return pods, residual


@given(cluster_inputs, st.floats(1.0, 3.0))
def test_refine_never_increases_imbalance(inputs, overload):
    pods, residual = build(inputs)
    plan = refine_lb(pods, residual, overload)
    assert set(plan) == {p.key for p in pods}
    before, after = node_loads(pods, residual), node_loads(pods, residual, plan)
    assert mae(after) <= mae(before) + 1e-6


@given(cluster_inputs)
def test_greedy_without_residual_ends_within_one_pod_of_balance(inputs):
    pods, residual = build(inputs)
    zero = dict.fromkeys(residual, 0.0)
    plan = greedy_lb(pods, zero)
    assert set(plan) == {p.key for p in pods} and set(plan.values()) <= set(zero)
    if pods:
        assert spread(node_loads(pods, zero, plan)) <= max(p.load for p in pods) + 1e-6


# -- a fake cluster: typed objects out, evictions recreate ReplicaSet pods ----------------------


def ts(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class FakeCluster:
    """Pods with a fixed CPU usage each (millicores); nodes report the sum of theirs.

    Evicting a ReplicaSet pod deletes it and creates a Pending replacement with the same
    owner and usage, as the ReplicaSet controller would.
    """

    def __init__(self, nodes, pods):
        self.nodes = nodes  # name -> allocatable cpu cores
        self.pods = {}  # (ns, name) -> dict
        self.seq = 0
        for spec in pods:
            self.add(**spec)
        self.evictions = []
        self.bindings = []

    def add(self, name, node, usage, namespace="default", owner="rs-a", scheduler="kse"):
        self.seq += 1
        self.pods[(namespace, name)] = dict(
            name=name,
            node=node,
            usage=usage,
            namespace=namespace,
            owner=owner,
            scheduler=scheduler,
            created=self.seq,
        )

    def v1pod(self, p):
        owners = None
        if p["owner"]:
            owners = [
                client.V1OwnerReference(
                    api_version="apps/v1",
                    kind="ReplicaSet",
                    name=p["owner"],
                    uid=f"uid-{p['owner']}",
                    controller=True,
                )
            ]
        return client.V1Pod(
            metadata=client.V1ObjectMeta(
                name=p["name"],
                namespace=p["namespace"],
                uid=f"uid-{p['namespace']}-{p['name']}",
                owner_references=owners,
                creation_timestamp=ts(p["created"]),
                resource_version=str(self.seq),
            ),
            spec=client.V1PodSpec(
                scheduler_name=p["scheduler"],
                node_name=p["node"],
                containers=[
                    client.V1Container(
                        name="app",
                        image="workload",
                        resources=client.V1ResourceRequirements(
                            requests={"cpu": "100m", "memory": "64Mi"}
                        ),
                    )
                ],
            ),
            status=client.V1PodStatus(phase="Running" if p["node"] else "Pending"),
        )

    # CoreV1Api
    def list_node(self, **_):
        return client.V1NodeList(
            items=[
                client.V1Node(
                    metadata=client.V1ObjectMeta(name=n, labels={"kubernetes.io/hostname": n}),
                    spec=client.V1NodeSpec(),
                    status=client.V1NodeStatus(allocatable={"cpu": str(c), "memory": "8Gi"}),
                )
                for n, c in self.nodes.items()
            ]
        )

    def list_pod_for_all_namespaces(self, **_):
        return client.V1PodList(
            items=[self.v1pod(p) for p in self.pods.values()],
            metadata=client.V1ListMeta(resource_version=str(self.seq)),
        )

    def create_namespaced_pod_eviction(self, name, namespace, body, **kwargs):
        assert kwargs.get("_preload_content") is False
        assert body.metadata.name == name
        assert namespace != "kube-system"
        p = self.pods.pop((namespace, name))
        self.evictions.append((namespace, name, p["node"]))
        if p["owner"]:
            self.add(f"{p['owner']}-r{self.seq}", None, p["usage"], namespace, p["owner"])

    def create_namespaced_binding(self, namespace, body, **kwargs):
        assert kwargs.get("_preload_content") is False
        p = self.pods[(namespace, body.metadata.name)]
        if p["node"] is not None:
            raise client.ApiException(status=409, reason="Conflict")
        p["node"] = body.target.name
        self.bindings.append((body.metadata.name, body.target.name))

    # CustomObjectsApi
    def list_cluster_custom_object(self, group, version, plural, **_):
        assert (group, version) == ("metrics.k8s.io", "v1beta1")
        running = [p for p in self.pods.values() if p["node"]]
        if plural == "nodes":
            return {
                "kind": "NodeMetricsList",
                "items": [
                    {
                        "metadata": {"name": n},
                        "usage": {
                            "cpu": f"{sum(p['usage'] for p in running if p['node'] == n)}m",
                            "memory": "1Gi",
                        },
                    }
                    for n in self.nodes
                ],
            }
        assert plural == "pods"
        return {
            "kind": "PodMetricsList",
            "items": [
                {
                    "metadata": {"name": p["name"], "namespace": p["namespace"]},
                    "containers": [
                        {"name": "app", "usage": {"cpu": f"{p['usage']}m", "memory": "64Mi"}}
                    ],
                }
                for p in running
            ],
        }


def skewed_cluster():
    return FakeCluster(
        {"n1": 4, "n2": 4, "n3": 4},
        [
            dict(name="a", node="n1", usage=600),
            dict(name="b", node="n1", usage=300),
            dict(name="c", node="n1", usage=100),
            dict(name="d", node="n2", usage=200),
            dict(name="e", node="n3", usage=300),
            dict(name="dns", node="n1", usage=50, namespace="kube-system"),
            dict(name="bare", node="n1", usage=50, owner=None),
            dict(name="other", node="n1", usage=50, scheduler="default-scheduler"),
        ],
    )


def test_snapshot_keeps_only_movable_pods_and_puts_the_rest_in_residual_load():
    fake = skewed_cluster()
    snap = take_snapshot(
        fake.list_node().items,
        fake.list_pod_for_all_namespaces().items,
        fake.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes"),
        fake.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "pods"),
        "kse",
        "cpu",
    )
    assert sorted(p.key for p in snap.pods) == [f"default/{x}" for x in "abcde"]
    assert snap.residual == {"n1": 150.0, "n2": 0.0, "n3": 0.0}  # dns + bare + other


def test_a_round_evicts_by_the_plan_and_records_imbalance(tmp_path):
    fake = skewed_cluster()
    targets = TargetBook()
    log_path = tmp_path / "imbalance.csv"
    rebalancer = Rebalancer(
        fake, fake, "kse", targets, algorithm="refine", imbalance_log=ImbalanceLog(log_path)
    )
    result = rebalancer.round()
    # loads 1150/200/300, avg 550: b (300) -> n2 (500); then c (100) -> n3 (400)
    assert result.evicted == [("default/b", "n1", "n2"), ("default/c", "n1", "n3")]
    assert len(targets) == 2
    rows = list(csv.DictReader(log_path.open()))
    assert rows[0]["round"] == "1" and rows[0]["evictions"] == "2"
    assert float(rows[0]["mae"]) == pytest.approx(mae({"n1": 1150, "n2": 200, "n3": 300}), abs=1e-3)
    assert float(rows[0]["planned_mae"]) < float(rows[0]["mae"])


def test_imbalance_falls_after_rebalancing_with_replacements_bound_to_the_plan(tmp_path):
    fake = skewed_cluster()
    targets = TargetBook()
    rebalancer = Rebalancer(fake, fake, "kse", targets, algorithm="greedy")
    binder = Binder(fake, "kse", targets, placement="random", seed=1)
    first = rebalancer.round()
    binder.resync()
    binder.bind_pending()
    assert all(why == "target" for _, _, why in binder.bindings)
    assert sorted(node for _, node, _ in binder.bindings) == sorted(t for _, _, t in first.evicted)
    second = rebalancer.round()
    assert mae(second.loads) < mae(first.loads)
    assert mae(second.loads) == pytest.approx(mae(first.planned))
    assert not any(ns == "kube-system" for ns, _, _ in fake.evictions)


def test_rounds_wait_for_moved_pods_to_be_rebound_but_not_forever():
    fake = skewed_cluster()
    targets = TargetBook()
    rebalancer = Rebalancer(fake, fake, "kse", targets, algorithm="refine")
    first = rebalancer.round()
    assert len(first.evicted) == 2 and len(targets) == 2  # replacements pending, unbound
    assert rebalancer.round().skipped and rebalancer.round().skipped
    third = rebalancer.round()  # settle_rounds (2) exhausted: forget the targets, go on
    assert not third.skipped and len(targets) == 0
    # the two replacements are pending: their load is unknown, nothing else to move
    assert third.evicted == []


def test_binder_places_new_pods_reproducibly_and_only_where_they_fit():
    def run(seed):
        fake = FakeCluster({"n1": 4, "n2": 4, "tiny": 0}, [])
        for i in range(6):
            fake.add(f"p{i}", None, 10, owner=None)
        binder = Binder(fake, "kse", TargetBook(), placement="random", seed=seed)
        binder.resync()
        binder.bind_pending()
        return fake.bindings

    first = run(3)
    assert first == run(3) and len(first) == 6
    assert {node for _, node in first} <= {"n1", "n2"}  # tiny has no room for 100m


def test_binder_respects_taints():
    fake = FakeCluster({"n1": 4, "gpu": 4}, [])
    fake.add("p", None, 10, owner=None)
    nodes = fake.list_node()
    nodes.items[1].spec.taints = [client.V1Taint(key="gpu", value="yes", effect="NoSchedule")]
    fake.list_node = lambda **_: nodes
    binder = Binder(fake, "kse", TargetBook(), placement="least-requested")
    binder.resync()
    binder.bind_pending()
    assert fake.bindings == [("p", "n1")]


def test_target_book_is_fifo_per_owner_and_can_withdraw():
    book = TargetBook()
    book.add("rs", "n1")
    book.add("rs", "n2")
    book.add("rs", "n1")
    book.discard("rs", "n1")
    assert [book.take("rs"), book.take("rs"), book.take("rs")] == ["n1", "n2", None]
    book.add("rs", "n3")
    assert book.clear() == 1 and len(book) == 0


def test_cli_rejects_bad_arguments(subprocess_env, capsys):
    from sample_schedulers.kse_rebalancer.__main__ import main

    for bad in (["--overload", "0.5"], ["--interval", "0"], ["--algorithm", "best"]):
        with pytest.raises(SystemExit) as exit_info:
            main(bad)
        assert exit_info.value.code == 2, bad
        assert bad[0] in capsys.readouterr().err
    # and through the real entry point, with nothing written
    r = subprocess.run(
        [sys.executable, "-m", "sample_schedulers.kse_rebalancer", "--overload", "0.5"],
        env=subprocess_env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "--overload must be >= 1.0" in r.stderr


def test_cli_unwritable_csv_is_a_usage_error(tmp_path, capsys):
    from sample_schedulers.kse_rebalancer.__main__ import main

    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["--imbalance-csv", str(blocker / "x.csv"), "--once"]) == 2
    assert "--imbalance-csv" in capsys.readouterr().err


def naive_refine(pods, residual, overload):
    """RefineLB written the obvious quadratic way, to pin the bisecting implementation."""
    plan = {p.key: p.node for p in pods}
    loads = node_loads(pods, residual)
    avg = sum(loads.values()) / len(loads)
    cap = avg * overload
    where = {p.key: p.node for p in pods}
    heavy = {n for n, v in loads.items() if v > cap}
    light = {n for n, v in loads.items() if v < avg}
    while heavy and light:
        donor = max(heavy, key=lambda n: (loads[n], n))
        options = [
            ((loads[t] + p.load, p.load, p.key, t), p, t)
            for p in pods
            if where[p.key] == donor
            for t in light
            if loads[t] + p.load <= cap
        ]
        if not options:
            heavy.discard(donor)
            continue
        _, p, t = max(options, key=lambda o: o[0])
        where[p.key] = plan[p.key] = t
        loads[donor] -= p.load
        loads[t] += p.load
        for n in (donor, t):
            (heavy.add if loads[n] > cap else heavy.discard)(n)
            (light.add if loads[n] < avg else light.discard)(n)
    return plan


@given(cluster_inputs, st.sampled_from([1.0, 1.05, 1.2, 2.0]))
def test_refine_matches_the_naive_algorithm(inputs, overload):
    pods, residual = build(inputs)
    assert refine_lb(pods, residual, overload) == naive_refine(pods, residual, overload)


# -- end to end over HTTP: the real CLI (APScheduler rounds + binder) against a fake API ------

# pytest puts tests/ on sys.path (no __init__.py there; a dependency ships a top-level
# "tests" package, so "tests.test_sched_kubcg" would not resolve).
from test_sched_kubcg import K8S24, FakeKubeApi, node_json, pod_json  # noqa: E402


@pytest.fixture(params=["installed", "24.2.0"])
def client_env(request, subprocess_env):
    """The installed client, then the old-style 24.2.0 one (skipped when not installed)."""
    if request.param == "installed":
        return subprocess_env
    if not (K8S24 / "kubernetes" / "__init__.py").exists():
        pytest.skip("kubernetes 24.2.0 is not installed in .venv/k8s24")
    path = os.pathsep.join([str(K8S24), subprocess_env["PYTHONPATH"]])
    return {**subprocess_env, "PYTHONPATH": path}


@pytest.fixture
def skewed_api():
    usage = {
        f"rs-{name}": {"cpu": cpu, "memory": "64Mi"}
        for name, cpu in [("a", "600m"), ("b", "300m"), ("c", "100m"), ("d", "200m"), ("e", "300m")]
    }
    usage["dns"] = {"cpu": "50m", "memory": "64Mi"}
    placed = [("a", "n1"), ("b", "n1"), ("c", "n1"), ("d", "n2"), ("e", "n3")]
    pods = [
        pod_json(name, scheduler="kse", node=node, owner=f"rs-{name}", status={"phase": "Running"})
        for name, node in placed
    ]
    system = pod_json(
        "dns", scheduler="kse", node="n1", owner="rs-dns", status={"phase": "Running"}
    )
    system["metadata"]["namespace"] = "kube-system"
    api = FakeKubeApi([node_json("n1"), node_json("n2"), node_json("n3")], [*pods, system], usage)
    yield api
    api.close()


def test_cli_rebalances_every_interval_and_imbalance_falls(skewed_api, client_env, tmp_path):
    api = skewed_api
    csv_path = tmp_path / "imbalance.csv"
    env = {**client_env, "KUBECONFIG": str(api.kubeconfig(tmp_path / "kubeconfig"))}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sample_schedulers.kse_rebalancer",
            "--scheduler-name",
            "kse",
            "--interval",
            "0.3",
            "--imbalance-csv",
            str(csv_path),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert api.wait_for(lambda a: len(a.bindings) == 2)
        reads = api.metrics_reads
        # rounds read metrics in pairs: by read reads+5, the round of reads+3/+4 (all after
        # the bindings) has written its row
        assert api.wait_for(lambda a: a.metrics_reads >= reads + 5)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
    assert proc.returncode == 0, out
    assert ("client 24.2.0" in out) == ("k8s24" in client_env["PYTHONPATH"])
    assert sorted(api.evictions) == [("b", "n1"), ("c", "n1")]
    assert sorted(node for _, node, _ in api.bindings) == ["n2", "n3"]
    rows = list(csv.DictReader(csv_path.open()))
    # n1 = 50 (dns) + 1000, n2 = 200, n3 = 300 -> after: 650 / 500 / 400
    assert float(rows[0]["mae"]) == pytest.approx(mae({"n1": 1050, "n2": 200, "n3": 300}), abs=0.01)
    assert float(rows[-1]["mae"]) == pytest.approx(mae({"n1": 650, "n2": 500, "n3": 400}), abs=0.01)
    assert rows[-1]["evictions"] == "0"


def test_cli_once_runs_one_round_and_exits(skewed_api, subprocess_env, tmp_path):
    csv_path = tmp_path / "once.csv"
    env = {**subprocess_env, "KUBECONFIG": str(skewed_api.kubeconfig(tmp_path / "kubeconfig"))}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sample_schedulers.kse_rebalancer",
            "--scheduler-name",
            "kse",
            "--algorithm",
            "greedy",
            "--once",
            "--imbalance-csv",
            str(csv_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(csv_path.open()))
    assert len(rows) == 1 and rows[0]["algorithm"] == "greedy"
    assert all(node for _, node in skewed_api.evictions)
    assert "dns" not in [name for name, _ in skewed_api.evictions]


# -- in simulated time: `timewarp simulate` with APScheduler patched --------------------------

KSE_PLATFORM = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="cluster" routing="Full">
    <host id="master_host" speed="1Gf"><prop id="role" value="master"/></host>
    <host id="n1" speed="1Gf"><prop id="core" value="2"/><prop id="memory" value="2Gi"/></host>
    <host id="n2" speed="1Gf"><prop id="core" value="2"/><prop id="memory" value="2Gi"/></host>
    <host id="n3" speed="1Gf"><prop id="core" value="2"/><prop id="memory" value="2Gi"/></host>
  </zone>
</platform>
"""


def kse_workload() -> dict:
    """Six ReplicaSet pods using 100m..600m of CPU (timewarp's ``usage`` extension) and two
    bare pods using 900m, all for 600 s, all for the ``kse`` scheduler."""
    usages = [100, 200, 300, 400, 500, 600, 900]
    profiles = {
        f"u{u}": {
            "type": "delay",
            "delay": 600,
            "cpu": "100m",
            "memory": "64Mi",
            "scheduler": "kse",
            "timewarp": {"usage": {"cpu": [[0, f"{u}m"]], "memory": [[0, "64Mi"]]}},
        }
        for u in usages
    }
    jobs = [
        {"id": str(i + 1), "subtime": 0, "res": 1, "profile": f"u{u}", "replicaset": f"rs-{i + 1}"}
        for i, u in enumerate(usages[:6])
    ]
    jobs += [{"id": str(i), "subtime": 0, "res": 1, "profile": "u900"} for i in (7, 8)]
    return {"nb_res": 3, "jobs": jobs, "profiles": profiles}


def test_simulate_rebalancing_every_60_virtual_seconds_lowers_imbalance(subprocess_env, tmp_path):
    """The rebalancer under `timewarp simulate`: APScheduler's interval job (patched with
    --patch-module) fires every 60 simulated seconds, metrics come from the broker; the
    broker's ReplicaSet controller replaces each evicted pod, the binder puts the
    replacement on the planned node, and the next round measures the imbalance the plan
    predicted."""
    import re

    platform = tmp_path / "platform.xml"
    platform.write_text(KSE_PLATFORM)
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(kse_workload()))
    out = tmp_path / "out"
    csv_path = tmp_path / "imbalance.csv"
    r = run_simulate(
        out,
        subprocess_env,
        "python -m sample_schedulers.kse_rebalancer --scheduler-name kse"
        f" --algorithm refine --imbalance-csv {csv_path}",
        platform,
        workload,
        "--patch-module",
        "apscheduler",
        "--epoch",
        "1000000000",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    figures = json.loads((out / "manifest.json").read_text())["figures"]
    assert figures["nondeterministic_advances"] == 0
    assert figures["rejected_by_kubelet"] == 0
    rows = list(csv.DictReader(csv_path.open()))
    stamps = [float(row["timestamp"]) - 1e9 for row in rows]  # --epoch 1e9
    assert len(rows) >= 2 and stamps[0] == pytest.approx(60.0)  # the first interval
    assert all((b - a) % 60 == 0 and b > a for a, b in zip(stamps, stamps[1:], strict=False))
    assert int(rows[0]["evictions"]) >= 1
    assert float(rows[0]["planned_mae"]) < float(rows[0]["mae"])
    log = (out / "scheduler-0.log").read_text()
    moves = re.findall(r"evicted default/(\S+) from (\S+) for (\S+)", log)
    evicted = {pod for pod, _, _ in moves}
    assert evicted and not evicted & {"w0.7", "w0.8"}  # bare pods never move
    # every replacement went where the plan said
    replaced = re.findall(r"bound default/(rs-\S+) to (\S+) \(target\)", log)
    assert sorted(node for _, node in replaced) == sorted(target for _, _, target in moves)
    # imbalance falls: the next measured round sees what the first one planned
    assert float(rows[1]["mae"]) == pytest.approx(float(rows[0]["planned_mae"]), abs=0.01)
    assert float(rows[1]["mae"]) < float(rows[0]["mae"])


def test_simulated_rebalancing_passes_the_determinism_check(subprocess_env, tmp_path):
    """Both runs of `--check-determinism` give the same bytes, evictions and
    replacements included (its imbalance CSV goes to the working directory, outside the
    outputs: both runs append to it, so it is not what is compared)."""
    platform = tmp_path / "platform.xml"
    platform.write_text(KSE_PLATFORM)
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps(kse_workload()))
    r = run_simulate(
        tmp_path / "out",
        subprocess_env,
        "python -m sample_schedulers.kse_rebalancer --scheduler-name kse --algorithm refine",
        platform,
        workload,
        "--patch-module",
        "apscheduler",
        "--cwd",
        str(tmp_path),
        "--check-determinism",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "the two runs wrote the same bytes" in r.stderr
    assert "evicted default/" in (tmp_path / "out" / "scheduler-0.log").read_text()
