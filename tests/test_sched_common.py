"""sample_schedulers.common: quantities, summaries, filters, the backoff queue, the cache,
and the watch/bind loop driven with the official client's typed objects."""

from __future__ import annotations

import json
import logging
import threading
import weakref
from collections import Counter
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sample_schedulers.common.cluster import ClusterCache
from sample_schedulers.common.feasibility import feasible_nodes, unfit_reason
from sample_schedulers.common.kube import bind_pod, load_config, watch_pods
from sample_schedulers.common.loop import Decision, WatchScheduler
from sample_schedulers.common.model import (
    NodeSummary,
    NodeView,
    PodSummary,
    Taint,
    Toleration,
    node_summary,
    pod_summary,
)
from sample_schedulers.common.queue import SchedulingQueue, natural_key
from sample_schedulers.common.resources import Resources, quantity_to_int

# -- builders of the client's typed objects (shared by the sched test files' style) ------


def make_pod(
    name,
    cpu="1",
    memory="1Gi",
    *,
    namespace="default",
    scheduler="default-scheduler",
    node=None,
    phase="Pending",
    created=0,
    priority=None,
    node_selector=None,
    tolerations=None,
    image="busybox",
    rv="1",
):
    requests = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name,
            namespace=namespace,
            resource_version=rv,
            creation_timestamp=datetime.fromtimestamp(created, UTC),
        ),
        spec=client.V1PodSpec(
            scheduler_name=scheduler,
            node_name=node,
            priority=priority,
            node_selector=node_selector,
            tolerations=tolerations,
            containers=[
                client.V1Container(
                    name="main",
                    image=image,
                    resources=client.V1ResourceRequirements(requests=requests or None),
                )
            ],
        ),
        status=client.V1PodStatus(phase=phase),
    )


def make_node(name, cpu="4", memory="8Gi", *, labels=None, taints=None, unschedulable=None):
    return client.V1Node(
        metadata=client.V1ObjectMeta(name=name, labels=labels, resource_version="1"),
        spec=client.V1NodeSpec(taints=taints, unschedulable=unschedulable),
        status=client.V1NodeStatus(allocatable={"cpu": cpu, "memory": memory, "pods": "110"}),
    )


def view(node: NodeSummary, *pods: PodSummary) -> NodeView:
    return NodeView(node, pods)


GI = 1024**3

# -- quantities -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("cpu", "1", 1000),
        ("cpu", "4000m", 4000),
        ("cpu", "0.188", 188),
        ("cpu", "0.0001", 1),  # rounds up like Quantity.MilliValue()
        ("memory", "500Mi", 500 * 1024**2),
        ("memory", "4Gi", 4 * GI),
        ("memory", "1G", 10**9),
        ("pods", "110", 110),
    ],
)
def test_quantities_become_integers_in_kubernetes_units(name, text, value):
    assert quantity_to_int(name, text) == value


def test_bad_quantity_names_the_resource():
    with pytest.raises(ValueError, match="'memory'.*'lots'"):
        quantity_to_int("memory", "lots")


# -- summaries of typed objects ---------------------------------------------------------------


def test_pod_summary_reads_requests_defaults_and_metadata():
    pod = make_pod("job-1", cpu="500m", memory="1Gi", created=100, priority=5)
    pod.spec.containers.append(
        client.V1Container(
            name="sidecar",
            image="envoy",
            resources=client.V1ResourceRequirements(limits={"cpu": "250m"}),
        )
    )
    pod.spec.init_containers = [
        client.V1Container(
            name="init", resources=client.V1ResourceRequirements(requests={"memory": "3Gi"})
        )
    ]
    s = pod_summary(pod)
    assert s.key == "default/job-1"
    assert s.created == 100.0 and s.priority == 5
    # sidecar's limit stands in for its missing request; the init container's 3Gi wins
    assert s.requests.cpu_millis == 750
    assert s.requests.memory_bytes == 3 * GI
    # scoring defaults: sidecar without memory request counts 200Mi
    assert s.nonzero_requests.memory_bytes == 3 * GI
    assert s.nonzero_requests.cpu_millis == 750
    assert s.containers == 2 and s.images == ("busybox", "envoy")
    assert not s.terminated and not s.occupies_node


def test_pod_without_requests_scores_with_kube_scheduler_defaults():
    s = pod_summary(make_pod("p", cpu=None, memory=None))
    assert s.requests.cpu_millis == 0
    assert s.nonzero_requests.cpu_millis == 100
    assert s.nonzero_requests.memory_bytes == 200 * 1024**2


def test_pod_with_bad_quantity_is_reported_by_name():
    with pytest.raises(ValueError, match="default/bad"):
        pod_summary(make_pod("bad", cpu="two"))


def test_node_summary_reads_allocatable_taints_and_images():
    node = make_node(
        "n1",
        cpu="6",
        memory="4Gi",
        labels={"kubernetes.io/hostname": "n1"},
        taints=[client.V1Taint(key="gpu", value="yes", effect="NoSchedule")],
        unschedulable=True,
    )
    node.status.images = [client.V1ContainerImage(names=["busybox:1"], size_bytes=1234)]
    s = node_summary(node)
    assert s.allocatable.cpu_millis == 6000 and s.allocatable.memory_bytes == 4 * GI
    assert s.taints == (Taint("gpu", "NoSchedule", "yes"),)
    assert s.unschedulable and s.images[0].size_bytes == 1234
    assert s.labels["kubernetes.io/hostname"] == "n1"


@pytest.mark.parametrize(
    ("toleration", "taint", "ok"),
    [
        (Toleration(key="a", operator="Exists"), Taint("a", "NoSchedule", "x"), True),
        (Toleration(key="a", value="x"), Taint("a", "NoSchedule", "x"), True),
        (Toleration(key="a", value="y"), Taint("a", "NoSchedule", "x"), False),
        (Toleration(key="b", operator="Exists"), Taint("a", "NoSchedule"), False),
        (Toleration(operator="Exists"), Taint("anything", "NoExecute"), True),
        (
            Toleration(key="a", operator="Exists", effect="NoExecute"),
            Taint("a", "NoSchedule"),
            False,
        ),
    ],
)
def test_toleration_matching_follows_kubernetes(toleration, taint, ok):
    assert toleration.tolerates(taint) is ok


# -- filters -----------------------------------------------------------------------------


def _node(name="n", cpu=4000, mem=8 * GI, **kw):
    return NodeSummary(name, Resources({"cpu": cpu, "memory": mem}), **kw)


def _pod(name="p", cpu=1000, mem=GI, node=None, phase="Pending", **kw):
    r = Resources({"cpu": cpu, "memory": mem})
    return PodSummary(
        "default", name, node_name=node, phase=phase, requests=r, nonzero_requests=r, **kw
    )


def test_fit_counts_only_pods_that_still_occupy_the_node():
    node = _node(cpu=2000)
    running = _pod("r", cpu=1500, node="n", phase="Running")
    finished = _pod("f", cpu=2000, node="n", phase="Succeeded")
    assert unfit_reason(_pod(cpu=500), view(node, running)) is None
    assert unfit_reason(_pod(cpu=501), view(node, running)) == "Insufficient cpu"
    # a Succeeded pod never enters a view (the cache drops it), but even if given:
    cache = ClusterCache()
    cache.upsert_node(node)
    cache.upsert_pod(finished)
    assert cache.views()[0].requested.cpu_millis == 0


def test_filters_name_the_reason_like_kube_scheduler():
    pod = _pod(node_selector={"disk": "ssd"})
    views = [
        view(_node("a", labels={"disk": "hdd"})),
        view(_node("b", labels={"disk": "ssd"}, unschedulable=True)),
        view(_node("c", labels={"disk": "ssd"}, taints=(Taint("gpu", "NoSchedule", "1"),))),
        view(_node("d", cpu=500, labels={"disk": "ssd"})),
        view(_node("e", labels={"disk": "ssd"}, taints=(Taint("x", "PreferNoSchedule"),))),
    ]
    fits, why = feasible_nodes(pod, views)
    assert [v.name for v in fits] == ["e"]
    fits, why = feasible_nodes(pod, views[:4])
    assert fits == []
    assert why == (
        "0/4 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {gpu: 1}, 1 node(s) were unschedulable."
    )


def _search_spelled_out(pod, views, want, start):
    """find_feasible's contract, the slow way: every examined node through unfit_reason."""
    fits, reasons, n, examined = [], Counter(), len(views), 0
    for k in range(n):
        view_ = views[(start + k) % n]
        examined += 1
        reason = unfit_reason(pod, view_)
        if reason is None:
            fits.append(view_)
            if len(fits) >= want:
                break
        else:
            reasons[reason] += 1
    if fits:
        return fits, "", examined
    detail = ", ".join(f"{c} {r}" for r, c in sorted(reasons.items()))
    return fits, f"0/{n} nodes are available" + (f": {detail}." if detail else "."), examined


node_specs = st.lists(
    st.tuples(
        st.sampled_from([0, 500, 1000, 2000]),  # cpu allocatable (millis)
        st.sampled_from([0, GI, 2 * GI]),  # memory allocatable
        st.sampled_from([0, 1000, 2500]),  # cpu used (may exceed allocatable)
        st.booleans(),  # cordoned
        st.booleans(),  # tainted
        st.booleans(),  # labelled disk=ssd
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200)
@given(
    node_specs,
    st.sampled_from([0, 300, 1000]),
    st.sampled_from([0, GI // 2]),
    st.booleans(),
    st.integers(1, 12),
    st.integers(0, 20),
)
def test_find_feasible_equals_the_search_spelled_out(specs, cpu, mem, selector, want, start):
    from sample_schedulers.common.feasibility import find_feasible

    views = []
    for i, (alloc_cpu, alloc_mem, used, cordoned, tainted, ssd) in enumerate(specs):
        node = _node(
            f"n{i}",
            cpu=alloc_cpu,
            mem=alloc_mem,
            unschedulable=cordoned,
            taints=(Taint("gpu", "NoSchedule"),) if tainted else (),
            labels={"disk": "ssd"} if ssd else {},
        )
        running = (_pod(f"r{i}", cpu=used, mem=0, node=f"n{i}", phase="Running"),) if used else ()
        views.append(NodeView(node, running))
    pod = _pod(cpu=cpu, mem=mem, node_selector={"disk": "ssd"} if selector else {})
    start %= len(views)
    assert find_feasible(pod, views, want, start) == _search_spelled_out(pod, views, want, start)


def test_tolerations_open_tainted_and_cordoned_nodes():
    pod = _pod(
        tolerations=(
            Toleration(key="gpu", operator="Exists"),
            Toleration(key="node.kubernetes.io/unschedulable", operator="Exists"),
        )
    )
    tainted = _node("c", taints=(Taint("gpu", "NoSchedule", "1"),), unschedulable=True)
    assert unfit_reason(pod, view(tainted)) is None


def test_pod_count_limit_is_enforced_when_published():
    node = NodeSummary("n", Resources({"cpu": 4000, "memory": GI, "pods": 1}))
    assert unfit_reason(_pod(mem=1), view(node, _pod("x", mem=1, node="n"))) == "Too many pods"


# -- the queue ---------------------------------------------------------------------------


def test_natural_order_puts_job_9_before_job_10():
    assert sorted(["job-10", "job-9", "job-1"], key=natural_key) == ["job-1", "job-9", "job-10"]


def test_pop_order_is_priority_then_creation_then_name():
    q = SchedulingQueue()
    pods = [
        PodSummary("default", "b", created=5),
        PodSummary("default", "a10", created=1),
        PodSummary("default", "a9", created=1),
        PodSummary("default", "urgent", created=9, priority=10),
    ]
    for p in pods:
        q.add(p, now=0)
    assert [q.pop(0).name for _ in pods] == ["urgent", "a9", "a10", "b"]
    assert q.pop(0) is None


def test_backoff_doubles_from_1s_and_caps_at_10s():
    q = SchedulingQueue()
    assert [q.backoff_duration(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]


def test_unschedulable_pod_waits_for_a_cluster_change_then_its_backoff():
    q = SchedulingQueue()
    q.add(PodSummary("default", "p"), now=0)
    assert q.pop(0).name == "p"
    q.failed("default/p", now=0)
    assert q.where("default/p") == "unschedulable"
    assert q.pop(100) is None  # no change: it stays put (until max_unschedulable)
    assert q.next_wakeup(100) == 200  # the 300 s flush
    q.move_all(now=100)  # backoff (1 s) long over: straight to active
    assert q.pop(100).name == "p"
    q.failed("default/p", now=100)
    q.move_all(now=100.5)  # second attempt: 2 s backoff, ends at 102
    assert q.where("default/p") == "backoff"
    assert q.next_wakeup(100.5) == 1.5
    assert q.pop(101.9) is None
    assert q.pop(102).name == "p"


def test_a_change_during_the_attempt_is_not_missed():
    q = SchedulingQueue()
    q.add(PodSummary("default", "p"), now=0)
    q.pop(0)
    q.move_all(now=0.5)  # e.g. a pod finished while we were deciding
    q.failed("default/p", now=1)
    assert q.where("default/p") == "backoff"
    assert q.pop(2).name == "p"


def test_pod_left_unschedulable_too_long_is_retried_anyway():
    q = SchedulingQueue(max_unschedulable=60)
    q.add(PodSummary("default", "p"), now=0)
    q.pop(0)
    q.failed("default/p", now=0)
    assert q.pop(59.9) is None
    assert q.pop(60).name == "p"


def test_binding_errors_back_off_without_waiting_for_a_change():
    q = SchedulingQueue()
    q.add(PodSummary("default", "p"), now=0)
    q.pop(0)
    q.failed("default/p", now=0, unschedulable=False)
    assert q.where("default/p") == "backoff"
    assert q.pop(1).name == "p"


@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 5), st.text("ab1", min_size=1, max_size=3)),
        min_size=1,
        max_size=20,
        unique_by=lambda t: t[2],
    ),
    st.lists(st.sampled_from(["fail", "change", "tick"]), max_size=30),
)
def test_queue_never_loses_a_pod_and_never_pops_one_early(specs, actions):
    q = SchedulingQueue(initial_backoff=1, max_backoff=4, max_unschedulable=20)
    for prio, created, name in specs:
        q.add(PodSummary("ns", name, priority=prio, created=created), now=0)
    now = 0.0
    for action in actions:
        if action == "tick":
            now += 0.75
        elif action == "change":
            q.move_all(now)
        else:
            pod = q.pop(now)
            if pod is not None:
                assert q.ready_at(pod.key) <= now
                q.failed(pod.key, now)
    assert len(q) == len(specs)
    # with enough time and a change, every pod comes back
    q.move_all(now)
    now += 100
    popped = set()
    while (pod := q.pop(now)) is not None:
        popped.add(pod.name)
    assert popped == {name for _, _, name in specs}


class _ScanningQueue(SchedulingQueue):
    """move_all as it was: look at every pending pod (the reference)."""

    def move_all(self, now):
        self._move_request_cycle = self._cycle
        for entry in list(self._entries.values()):
            if entry.where == "unschedulable":
                self._move(entry, now)


@settings(max_examples=200)
@given(
    st.lists(st.sampled_from(["add", "pop", "change", "tick", "remove"]), max_size=60),
    st.integers(0, 2**32 - 1),
)
def test_move_all_touches_only_unschedulable_pods_and_equals_a_full_scan(actions, seed):
    import random

    rnd = random.Random(seed)
    fast, slow = SchedulingQueue(max_unschedulable=30), _ScanningQueue(max_unschedulable=30)
    now, made = 0.0, 0
    for action in actions:
        if action == "add":
            pod = PodSummary("ns", f"p{made}", priority=rnd.randint(0, 2))
            made += 1
            fast.add(pod, now)
            slow.add(pod, now)
        elif action == "pop":
            got = fast.pop(now), slow.pop(now)
            assert got[0] == got[1]
            if got[0] is not None and rnd.random() < 0.7:
                fast.failed(got[0].key, now)
                slow.failed(got[0].key, now)
        elif action == "change":
            fast.move_all(now)
            slow.move_all(now)
        elif action == "tick":
            now += rnd.choice([0.5, 3, 40])
        elif action == "remove" and made:
            key = f"ns/p{rnd.randrange(made)}"
            fast.remove(key)
            slow.remove(key)
        assert {f"ns/p{i}": fast.where(f"ns/p{i}") for i in range(made)} == {
            f"ns/p{i}": slow.where(f"ns/p{i}") for i in range(made)
        }
        assert fast.next_wakeup(now) == slow.next_wakeup(now)


# -- the cache ---------------------------------------------------------------------------


def test_assumed_pod_counts_until_the_watch_confirms_or_it_is_forgotten():
    cache = ClusterCache()
    cache.upsert_node(_node("n"))
    pod = _pod("p", cpu=1000)
    cache.upsert_pod(pod)
    cache.assume(pod, "n")
    assert cache.views()[0].requested.cpu_millis == 1000
    cache.forget("default/p")
    assert cache.views()[0].requested.cpu_millis == 0
    cache.assume(pod, "n")
    cache.upsert_pod(_pod("p", cpu=1000, node="n", phase="Running"))  # the watch confirms
    assert not cache.is_assumed("default/p")
    assert cache.views()[0].requested.cpu_millis == 1000
    cache.upsert_pod(_pod("p", cpu=1000, node="n", phase="Succeeded"))
    assert cache.views()[0].requested.cpu_millis == 0


cache_ops = st.lists(
    st.one_of(
        st.tuples(st.just("node"), st.sampled_from("abcde"), st.sampled_from([1000, 2000])),
        st.tuples(st.just("drop-node"), st.sampled_from("abcde")),
        st.tuples(
            st.just("pod"),
            st.sampled_from("pqrs"),
            st.sampled_from([None, "a", "b", "c", "e"]),
            st.sampled_from(["Pending", "Running", "Succeeded"]),
        ),
        st.tuples(st.just("drop-pod"), st.sampled_from("pqrs")),
        st.tuples(st.just("assume"), st.sampled_from("pqrs"), st.sampled_from("abcde")),
        st.tuples(st.just("forget"), st.sampled_from("pqrs")),
    ).flatmap(lambda op: st.tuples(st.just(op), st.booleans())),  # look at views() after it?
    max_size=40,
)


@settings(max_examples=300)
@given(cache_ops)
def test_cached_views_equal_views_built_from_scratch(ops):
    """views() patches its sorted list in place; it must equal a fresh build: every node
    by name, with exactly the (effective) pods occupying it, sorted by key; and every
    position whose view changed since the last call is in its ``replaced`` history
    (what the filter's index catches up from)."""
    cache = ClusterCache()
    before = None  # (the list, a copy of it, its history mark) at the last look

    def expected():
        out = []
        for name in sorted(cache.nodes):
            pods = [cache.effective(k) for k in sorted(set(cache.pods) | set(cache._assumed))]
            mine = tuple(p for p in pods if p and p.occupies_node and p.node_name == name)
            out.append(NodeView(cache.nodes[name], mine))
        return out

    for op, look in ops:
        if op[0] == "node":
            cache.upsert_node(_node(op[1], cpu=op[2]))
        elif op[0] == "drop-node":
            cache.delete_node(op[1])
        elif op[0] == "pod":
            cache.upsert_pod(_pod(op[1], node=op[2], phase=op[3]))
        elif op[0] == "drop-pod":
            cache.delete_pod(f"default/{op[1]}")
        elif op[0] == "assume" and f"default/{op[1]}" in cache.pods:
            cache.assume(cache.pods[f"default/{op[1]}"], op[2])
        elif op[0] == "forget":
            cache.forget(f"default/{op[1]}")
        if look:
            got = cache.views()
            assert got == expected()
            if before is not None and before[0] is got:
                _, copy_then, mark = before
                changed = {
                    i for i, (a, b) in enumerate(zip(copy_then, got, strict=True)) if a is not b
                }
                assert changed <= set(got.replaced[mark - got.forgotten :])
            before = (got, list(got), got.changes)
    assert cache.views() == expected()


# -- the loop with typed objects and no network ----------------------------------------------


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def first_fit(pod, views):
    fits, why = feasible_nodes(pod, views)
    return Decision(fits[0].name) if fits else Decision(None, why)


def make_scheduler(decide=first_fit, name="default-scheduler", fail=None):
    bindings = []

    def binder(ns, pod, node):
        if fail:
            raise fail
        bindings.append((f"{ns}/{pod}", node))

    clock = FakeClock()
    s = WatchScheduler(None, decide, scheduler_name=name, binder=binder, clock=clock)
    return s, bindings, clock


def drain(s: WatchScheduler) -> None:
    while s.schedule_one(timeout=0):
        pass


def test_loop_binds_only_its_own_unassigned_pods():
    s, bindings, _ = make_scheduler(name="default")
    s.replace_nodes([make_node("n1")])
    s.replace_pods(
        [
            make_pod("mine", scheduler="default"),
            make_pod("other", scheduler="someone-else"),
            make_pod("bound", scheduler="default", node="n1", phase="Running"),
            make_pod("done", scheduler="default", phase="Succeeded"),
        ]
    )
    drain(s)
    assert bindings == [("default/mine", "n1")]


def test_loop_waits_for_both_lists_before_deciding():
    s, bindings, _ = make_scheduler()
    s.replace_pods([make_pod("p")])
    assert s.schedule_one(timeout=0) is False
    s.replace_nodes([make_node("n1")])
    drain(s)
    assert bindings == [("default/p", "n1")]


def test_assumed_pods_prevent_overallocation_before_the_watch_catches_up():
    s, bindings, _ = make_scheduler()
    s.replace_nodes([make_node("n1", cpu="2"), make_node("n2", cpu="2")])
    s.replace_pods([make_pod(f"p{i}", cpu="1", created=i) for i in range(5)])
    drain(s)
    # no watch events came back, yet each node got only what fits
    assert bindings == [
        ("default/p0", "n1"),
        ("default/p1", "n1"),
        ("default/p2", "n2"),
        ("default/p3", "n2"),
    ]
    assert s.queue.where("default/p4") == "unschedulable"


def test_waiting_pod_is_bound_after_a_pod_finishes_and_its_backoff_ends():
    s, bindings, clock = make_scheduler()
    s.replace_nodes([make_node("n1", cpu="1")])
    s.replace_pods([make_pod("a", cpu="1", created=0), make_pod("b", cpu="1", created=1)])
    drain(s)
    assert bindings == [("default/a", "n1")]
    s.on_pod_event("MODIFIED", make_pod("a", cpu="1", node="n1", phase="Running", rv="2"))
    drain(s)
    clock.now = 0.5
    s.on_pod_event("MODIFIED", make_pod("a", cpu="1", node="n1", phase="Succeeded", rv="3"))
    assert s.queue.where("default/b") == "backoff"  # 1 s after its failure at t=0
    assert s.schedule_one(timeout=0) is False
    clock.now = 1.0
    drain(s)
    assert bindings[-1] == ("default/b", "n1")


def test_a_new_node_lets_waiting_pods_in():
    s, bindings, clock = make_scheduler()
    s.replace_nodes([])
    s.replace_pods([make_pod("p")])
    drain(s)
    assert bindings == []
    clock.now = 5
    s.on_node_event("ADDED", make_node("late"))
    drain(s)
    assert bindings == [("default/p", "late")]


def test_deleted_pending_pod_is_dropped():
    s, bindings, _ = make_scheduler()
    s.replace_nodes([])
    s.replace_pods([make_pod("p")])
    drain(s)
    s.on_pod_event("DELETED", make_pod("p"))
    assert "default/p" not in s.queue


def test_conflict_on_bind_drops_the_pod_and_the_assumption():
    s, bindings, _ = make_scheduler(fail=ApiException(status=409, reason="Conflict"))
    s.replace_nodes([make_node("n1")])
    s.replace_pods([make_pod("p")])
    drain(s)
    assert "default/p" not in s.queue
    assert s.cache.views()[0].pods == ()


def test_server_error_on_bind_retries_with_backoff():
    s, bindings, _ = make_scheduler(fail=ApiException(status=500, reason="boom"))
    s.replace_nodes([make_node("n1")])
    s.replace_pods([make_pod("p")])
    drain(s)
    assert s.queue.where("default/p") == "backoff"


def test_relist_forgets_pods_deleted_while_not_watching():
    s, _, _ = make_scheduler()
    s.replace_nodes([make_node("n1")])
    s.replace_pods([make_pod("gone", node="n1", phase="Running")])
    assert s.cache.views()[0].pods
    s.replace_pods([])
    assert s.cache.views()[0].pods == ()


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["100m", "500m", "1", "1500m", "3"]),
            st.sampled_from(["128Mi", "1Gi", "3Gi"]),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_no_node_is_ever_overcommitted(requests):
    from sample_schedulers.default_like.scoring import decide

    s, bindings, _ = make_scheduler(decide=decide)
    nodes = [make_node("n1", cpu="2", memory="4Gi"), make_node("n2", cpu="4", memory="2Gi")]
    s.replace_nodes(nodes)
    s.replace_pods([make_pod(f"p{i}", cpu=c, memory=m) for i, (c, m) in enumerate(requests)])
    drain(s)
    alloc = {n.metadata.name: node_summary(n).allocatable for n in nodes}
    used: dict[str, Resources] = {}
    by_key = {f"default/p{i}": r for i, r in enumerate(requests)}
    for key, node in bindings:
        c, m = by_key[key]
        used[node] = used.get(node, Resources()) + Resources.parse({"cpu": c, "memory": m})
    for node, u in used.items():
        assert u.cpu_millis <= alloc[node].cpu_millis
        assert u.memory_bytes <= alloc[node].memory_bytes
    # and every pod that was left over really fits nowhere
    for i in range(len(requests)):
        key = f"default/p{i}"
        if key in s.queue:
            assert s.queue.where(key) == "unschedulable"


# -- the real client against a tiny local API server ------------------------------------


class FakeApiServer:
    """Just enough of an API server for the loop: list and watch pods and nodes (a watch
    delivers queued events, then ends), and the pod binding endpoint, which answers a
    ``Status`` like the real one and records the binding as a MODIFIED pod event."""

    def __init__(self, nodes, pods):
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.rv = 10
        self.events: dict[str, list] = {"pods": [], "nodes": []}
        self.bindings: list[tuple[str, str]] = []
        self.cond = threading.Condition()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                path, _, query = self.path.partition("?")
                kind = {"/api/v1/pods": "pods", "/api/v1/nodes": "nodes"}.get(path)
                if kind is None:
                    return self._send(404, {"kind": "Status", "code": 404})
                if "watch=true" in query.lower():
                    return self._watch(kind)
                with server.cond:
                    items = list((server.pods if kind == "pods" else server.nodes).values())
                    rv = str(server.rv)
                self._send(
                    200, {"kind": "List", "metadata": {"resourceVersion": rv}, "items": items}
                )

            def _watch(self, kind):
                with server.cond:
                    server.cond.wait_for(lambda: server.events[kind], timeout=0.5)
                    events, server.events[kind] = server.events[kind], []
                body = b"".join(json.dumps(e).encode() + b"\n" for e in events)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                parts = self.path.split("?")[0].split("/")
                # /api/v1/namespaces/{ns}/pods/{name}/binding or /api/v1/namespaces/{ns}/bindings
                name = parts[6] if parts[-1] == "binding" else body["metadata"]["name"]
                node = body["target"]["name"]
                with server.cond:
                    pod = server.pods[name]
                    pod["spec"]["nodeName"] = node
                    pod["status"] = {"phase": "Running"}
                    server.rv += 1
                    pod["metadata"]["resourceVersion"] = str(server.rv)
                    server.bindings.append((name, node))
                    server.events["pods"].append({"type": "MODIFIED", "object": pod})
                    server.cond.notify_all()
                self._send(
                    201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
                )

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # clients hanging up mid-watch at shutdown are expected

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def core(self):
        cfg = client.Configuration()
        cfg.host = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        return client.CoreV1Api(client.ApiClient(cfg))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def raw_pod(name, cpu, created):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "resourceVersion": "1",
            "creationTimestamp": f"2020-01-01T00:00:{created:02d}Z",
        },
        "spec": {
            "schedulerName": "default",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Pending"},
    }


def raw_node(name, cpu):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "110"}},
    }


def test_bind_pod_survives_the_status_answer_with_the_real_client():
    with FakeApiServer([raw_node("n1", "2")], [raw_pod("p", "1", 0)]) as server:
        bind_pod(server.core(), "default", "p", "n1")
        assert server.bindings == [("p", "n1")]


def test_loop_lists_watches_and_binds_through_the_official_client():
    from sample_schedulers.default_like.scoring import decide

    nodes = [raw_node("n1", "2"), raw_node("n2", "1")]
    pods = [raw_pod(f"p{i}", "1", i) for i in range(4)]
    with FakeApiServer(nodes, pods) as server:
        s = WatchScheduler(server.core(), decide, scheduler_name="default", watch_timeout=1)
        runner = threading.Thread(target=s.run, daemon=True)
        runner.start()
        with s._cond:
            waiting = s._cond.wait_for(
                lambda: s.queue.where("default/p3") == "unschedulable", timeout=10
            )
        s.stop()
        assert waiting
        runner.join(timeout=10)
        assert not runner.is_alive()
    # three 1-cpu pods fill n1 (2 cpu) and n2 (1 cpu); the fourth waits
    assert sorted(server.bindings) == [("p0", "n1"), ("p1", "n2"), ("p2", "n1")]
    assert s.bound == 3


def test_bind_pod_puts_annotations_on_the_binding():
    calls = []

    class Core:
        def create_namespaced_binding(self, namespace, body, **kwargs):
            calls.append((namespace, body, kwargs))

    bind_pod(Core(), "ns", "p", "n1", annotations={"a/b": "gpu"})
    bind_pod(Core(), "ns", "q", "n2")
    (ns, body, kwargs), (_, plain, _) = calls
    assert (ns, body.metadata.name, body.target.name) == ("ns", "p", "n1")
    assert body.metadata.annotations == {"a/b": "gpu"}
    assert kwargs == {"_preload_content": False}
    assert plain.metadata.annotations is None


class ScriptedWatch:
    """Each ``stream`` call plays the next step of a shared script: a list of events,
    or an exception to raise. When the script is exhausted it stops the loop."""

    def __init__(self, script, requested, stop):
        self.script, self.requested, self.stop_event = script, requested, stop

    def stream(self, func, **kwargs):
        self.requested.append(kwargs["resource_version"])
        if not self.script:
            self.stop_event.set()
            return
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        yield from step

    def stop(self):
        pass


def test_watch_pods_resumes_relists_on_410_and_retries_errors():
    pod = make_pod("a", rv="8")
    script = [
        [{"type": "ADDED", "object": pod}],
        ApiException(status=410, reason="Gone"),
        ApiException(status=500, reason="Oops"),
        ConnectionResetError("reset"),
    ]
    stop = threading.Event()
    requested, seen, trail = [], [], []
    state = {"version": "7"}

    def on_event(kind, obj):
        seen.append((kind, obj.metadata.name))
        state["version"] = obj.metadata.resource_version

    def resync():
        trail.append("resync")
        state["version"] = "20"

    class Core:
        def list_pod_for_all_namespaces(self, **kwargs):
            raise AssertionError("the watch object calls this, not the loop")

    watch_pods(
        Core(),
        resource_version=lambda: state["version"],
        on_event=on_event,
        resync=resync,
        react=lambda: trail.append("react"),
        stop=stop,
        log=logging.getLogger("test"),
        retry_delay=0.001,
        watch_factory=lambda: ScriptedWatch(script, requested, stop),
    )
    assert seen == [("ADDED", "a")]
    # the event's version, then the re-listed one; errors retry from where we were
    assert requested == ["7", "8", "20", "20", "20"]
    assert trail == ["react", "resync", "react"]


def test_load_config_names_both_failures(tmp_path, monkeypatch):
    from kubernetes import config

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(config.ConfigException, match="not in a cluster"):
        load_config()


# -- each sample's command line, as a real process, against the local API server ------------


def write_kubeconfig(path, port):
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: fake, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: me, user: {token: sample-token}}]\n"
        "contexts: [{name: ctx, context: {cluster: fake, user: me}}]\n"
        "current-context: ctx\n"
    )


@pytest.mark.parametrize("sample", ["default_like", "kcss"])
def test_sample_runs_as_a_process_and_binds_what_fits(sample, subprocess_env, tmp_path):
    import signal
    import subprocess
    import sys

    nodes = [raw_node("n1", "2"), raw_node("n2", "1")]
    pods = [raw_pod(f"p{i}", "1", i) for i in range(4)]
    with FakeApiServer(nodes, pods) as server:
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, server.httpd.server_address[1])
        proc = subprocess.Popen(
            [sys.executable, "-m", f"sample_schedulers.{sample}", "--scheduler-name", "default"],
            env=dict(subprocess_env, KUBECONFIG=str(kubeconfig)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            with server.cond:
                done = server.cond.wait_for(lambda: len(server.bindings) == 3, timeout=30)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
        assert done, err
    assert proc.returncode == 0, err
    # 3 cpu of capacity, four 1-cpu pods: exactly three bound, none over capacity
    per_node = {}
    for _, node in server.bindings:
        per_node[node] = per_node.get(node, 0) + 1
    assert per_node == {"n1": 2, "n2": 1}
    assert "bound default/p0 to" in err
    assert "stopped after binding" in err


# -- fail fast --------------------------------------------------------------------------------


def test_fail_fast_skips_pods_that_need_at_least_as_much_as_one_that_failed():
    calls = []

    def counting(pod, views):
        calls.append(pod.name)
        return first_fit(pod, views)

    s, bindings, _ = make_scheduler(decide=counting)
    s.fail_fast = True
    s.replace_nodes([make_node("n1", cpu="1")])
    pods = [make_pod("big", cpu="1", created=0)]
    pods += [make_pod(f"w{i}", cpu="1", created=1) for i in range(20)]
    pods += [make_pod("bigger", cpu="2", created=2), make_pod("small", cpu="500m", created=3)]
    s.replace_pods(pods)
    drain(s)
    assert bindings == [("default/big", "n1")]
    # w0 is evaluated; w1..w19 and "bigger" reuse its failure; "small" is evaluated
    assert calls == ["big", "w0", "small"]
    assert all(s.queue.where(f"default/w{i}") == "unschedulable" for i in range(20))


@given(
    st.lists(st.sampled_from(["250m", "500m", "1", "2"]), min_size=1, max_size=15),
    st.lists(st.integers(0, 14), max_size=8),
)
def test_fail_fast_never_changes_a_decision(cpus, finish_order):
    from sample_schedulers.default_like.scoring import decide

    runs = []
    for fail_fast in (False, True):
        s, bindings, clock = make_scheduler(decide=decide)
        s.fail_fast = fail_fast
        s.replace_nodes([make_node("n1", cpu="2"), make_node("n2", cpu="1500m")])
        s.replace_pods([make_pod(f"p{i}", cpu=c, created=i) for i, c in enumerate(cpus)])
        drain(s)
        for i in finish_order:  # pods finish one by one; waiting ones get their turn
            clock.now += 20
            done = [b for b in bindings if b[0] == f"default/p{i}"]
            if done:
                finished = make_pod(f"p{i}", cpu=cpus[i], node=done[0][1], phase="Succeeded")
                s.on_pod_event("MODIFIED", finished)
            drain(s)
        runs.append(bindings)
    assert runs[0] == runs[1]


def test_pod_updated_while_its_binding_is_in_flight_is_not_lost_when_binding_fails():
    s, _, _ = make_scheduler()

    def flaky_binder(ns, name, node):
        # the watch reports an unrelated change to the still-pending pod mid-binding
        s.on_pod_event("MODIFIED", make_pod(name, rv="7"))
        raise ApiException(status=503, reason="unavailable")

    s.bind = flaky_binder
    s.replace_nodes([make_node("n1")])
    s.replace_pods([make_pod("p")])
    drain(s)
    assert s.queue.where("default/p") == "backoff"
    assert not s.cache.is_assumed("default/p")


def test_unchanged_node_update_does_not_wake_waiting_pods():
    s, bindings, clock = make_scheduler()
    s.replace_nodes([make_node("n1", cpu="1")])
    s.replace_pods([make_pod("a", cpu="1"), make_pod("b", cpu="1", created=1)])
    drain(s)
    clock.now = 50
    s.on_node_event("MODIFIED", make_node("n1", cpu="1"))  # e.g. a heartbeat
    assert s.queue.where("default/b") == "unschedulable"
    s.on_node_event("MODIFIED", make_node("n1", cpu="2"))  # grown: worth a retry
    drain(s)
    assert bindings == [("default/a", "n1"), ("default/b", "n1")]


def test_the_informer_lets_the_listed_objects_go_while_it_watches():
    """The cache keeps summaries; the listed objects (every node, as the client's
    models) must not stay alive for the whole watch, where each full collection of the
    cyclic GC would walk them."""

    class Listing:
        items: list = []
        metadata = SimpleNamespace(resource_version="5")

    listing: Listing | None = Listing()
    listed = weakref.ref(listing)

    def list_call():
        nonlocal listing
        given, listing = listing, None
        return given

    s = WatchScheduler(core=None, decide=lambda pod, views: Decision(None))
    alive_while_watching = []

    def watch_once(list_call, version, on_event):
        alive_while_watching.append(listed() is not None)
        s._stop.set()
        return version

    s._watch_once = watch_once
    s._informer("nodes", list_call, lambda objs: None, lambda kind, obj: None)
    assert alive_while_watching == [False]
