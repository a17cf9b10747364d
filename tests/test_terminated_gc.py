"""Terminated-pod GC (``broker/controllers/terminated_gc.py``), as kube-controller-manager's
PodGC ``gcTerminated``: past ``--terminated-pod-gc-threshold`` terminated pods, the
oldest go (evicted first, then by creationTimestamp, then name), at most every 20 s of
virtual time — and a run's outputs do not change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_dynamic_jobs import create_at_start, job_manifest

from broker.controllers import registry
from broker.controllers.terminated_gc import CHECK_PERIOD_NS, DEFAULT_THRESHOLD, TerminatedPodGC
from broker.drivers.inprocess import InProcessRun
from broker.facade.objects import format_time
from commands import simulate
from commands.simulating import options

PROFILES = {"d": {"type": "delay", "delay": 7, "cpu": "1", "scheduler": "default"}}
# 40 one-core jobs on 2×2 cores: a queue, and pods ending all along the run
JOBS = [
    {"id": str(i), "subtime": 3 * i, "res": 1, "profile": "d", "walltime": 100} for i in range(40)
]


def _run(tmp_path: Path, threshold: int, jobs=JOBS, before=None) -> InProcessRun:
    tmp_path.mkdir(parents=True, exist_ok=True)
    world = InProcessRun(tmp_path, nodes=2, cores=2)
    world.cluster.controllers[registry.TERMINATED_POD_GC].threshold = threshold
    world.run(jobs, PROFILES, before=before)
    return world


def test_the_outputs_are_those_of_a_run_without_it(tmp_path):
    without = _run(tmp_path / "off", 0)
    with_gc = _run(tmp_path / "on", 3)
    try:
        gc = with_gc.cluster.controllers[registry.TERMINATED_POD_GC]
        assert gc.collected >= 30  # it did collect
        assert with_gc.store.count("pods") == len(JOBS) - gc.collected
        assert without.cluster.controllers[registry.TERMINATED_POD_GC].collected == 0
        assert without.store.count("pods") == len(JOBS)
        assert with_gc.replies == without.replies  # every decision sent to Batsim
        assert with_gc.rows() == without.rows()  # jobs.csv
    finally:
        with_gc.close()
        without.close()


def test_ended_jobs_leave_the_clusters_tables(tmp_path):
    world = _run(tmp_path, 3)
    try:
        cluster = world.cluster
        assert cluster.jobs == {}  # every job ended: none kept
        assert len(cluster.ended_job_ids) == len(JOBS)
        assert len(cluster.pods) == world.store.count("pods")  # the collected are forgotten
    finally:
        world.close()


def test_a_jobs_completions_are_counted_although_its_pods_go(tmp_path):
    manifest = job_manifest("pi", duration=10, completions=8, parallelism=2)
    world = InProcessRun(tmp_path, nodes=2, cores=2)
    try:
        world.cluster.controllers[registry.TERMINATED_POD_GC].threshold = 1
        world.run(JOBS[:1], PROFILES, before=create_at_start(world, ("jobs.batch", manifest)))
        status = world.store.get("jobs.batch", "default", "pi")["status"]
        assert status["succeeded"] == 8 and "failed" not in status
        assert world.cluster.controllers[registry.TERMINATED_POD_GC].collected >= 6
        assert len(world.events("SuccessfulCreate")) == 8  # no pod made again for one collected
    finally:
        world.close()


# ----------------------------------------------------------------- the controller alone


class _Clock:
    def __init__(self) -> None:
        self.now = 0

    def now_ns(self) -> int:
        return self.now


class _Pods:
    def __init__(self, store: Any) -> None:
        self.store = store
        self.deleted: list[str] = []

    def delete_controlled_pod(self, namespace: str, name: str) -> None:
        self.deleted.append(name)
        self.store.delete("pods", namespace, name)


def _pod(name: str, created_s: int, phase: str, reason: str | None = None) -> dict:
    status: dict[str, Any] = {"phase": phase}
    if reason:
        status["reason"] = reason
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": status,
        "_created": format_time(created_s * 10**9),
    }


@pytest.fixture
def lone(tmp_path):
    from broker.clock.service import ClockService, FacadeClock
    from broker.facade import Facade

    clock = ClockService()
    facade = Facade(FacadeClock(clock))
    yield facade.store
    clock.close()


def _store_pods(store, pods: list[dict]) -> None:
    for pod in pods:
        created = pod.pop("_created")
        status = pod.pop("status")
        store.create("pods", pod, copy=False)

        def finish(obj, status=status, created=created):
            obj["status"] = status
            obj["metadata"]["creationTimestamp"] = created

        store.update("pods", "default", pod["metadata"]["name"], finish, copy=False)


def test_it_deletes_evicted_then_oldest_then_by_name_beyond_the_threshold(lone):
    _store_pods(
        lone,
        [
            _pod("b-old", 10, "Succeeded"),
            _pod("a-old", 10, "Failed"),  # same instant as b-old: the name decides
            _pod("newest", 50, "Succeeded"),
            _pod("evicted", 90, "Failed", "Evicted"),  # evicted: first, however new
            _pod("running", 1, "Running"),  # not terminated: never
            _pod("middle", 30, "Failed", "Error"),
        ],
    )
    clock, pods = _Clock(), _Pods(lone)
    gc = TerminatedPodGC(lone, clock, pods)
    gc.threshold = 2
    gc.start()
    assert gc.terminated() == 5 and gc.has_work()
    assert gc.reconcile()
    assert pods.deleted == ["evicted", "a-old", "b-old"]
    assert gc.terminated() == 2 and gc.collected == 3
    assert {p["metadata"]["name"] for p in lone.list("pods")[0]} == {"newest", "running", "middle"}


def test_a_pass_at_most_every_20_s_of_virtual_time(lone):
    clock, pods = _Clock(), _Pods(lone)
    gc = TerminatedPodGC(lone, clock, pods)
    gc.threshold = 1
    gc.start()
    assert not gc.has_work()  # nothing over the threshold: nothing to do
    _store_pods(lone, [_pod("p1", 1, "Succeeded"), _pod("p2", 2, "Succeeded")])
    assert gc.has_work() and gc.reconcile() and pods.deleted == ["p1"]
    _store_pods(lone, [_pod("p3", 3, "Succeeded")])
    clock.now = CHECK_PERIOD_NS - 1
    assert not gc.has_work() and not gc.reconcile()  # too soon after the last pass
    clock.now = CHECK_PERIOD_NS
    assert gc.has_work() and gc.reconcile() and pods.deleted == ["p1", "p2"]


def test_a_threshold_of_zero_turns_it_off(lone):
    _store_pods(lone, [_pod(f"p{i}", i, "Succeeded") for i in range(3)])
    gc = TerminatedPodGC(lone, _Clock(), _Pods(lone))
    gc.threshold = 0
    gc.start()
    assert not gc.has_work() and not gc.reconcile() and gc.terminated() == 0


def test_the_commands_default_is_kube_controller_managers():
    assert options.TERMINATED_POD_GC_THRESHOLD == DEFAULT_THRESHOLD == 12_500


def test_a_negative_threshold_is_refused(capsys):
    import argparse

    parser = argparse.ArgumentParser()
    simulate.add_run_arguments(parser)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--terminated-pod-gc-threshold", "-1"])
    assert exc.value.code == 2
    assert "--terminated-pod-gc-threshold" in capsys.readouterr().err
    assert (
        parser.parse_args(["--terminated-pod-gc-threshold", "0"]).terminated_pod_gc_threshold == 0
    )


# ------------------------------------------------------- nothing else keeps every pod


def test_the_decision_log_spills_its_rows_and_writes_the_same_file(tmp_path, monkeypatch):
    from broker.cluster import decisions

    def log_of(rows_in_memory: int) -> tuple[bytes, int]:
        monkeypatch.setattr(decisions, "SPILL_ROWS", rows_in_memory)
        log = decisions.DecisionLog(lambda: 1.5, 0, lambda pod: "w0!1")
        node = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "64"}}}
        log.on_commit("nodes", "ADDED", node)
        most = 0
        for i in range(10):
            pod = {
                "metadata": {"name": f"p{i}", "namespace": "default"},
                "spec": {"nodeName": "n", "containers": [{"name": "c"}]},
            }
            log.on_commit("pods", "MODIFIED", pod)
            most = max(most, len(log.rows))
        path = tmp_path / f"d{rows_in_memory}.csv"
        log.write(path)
        log.on_commit("nodes", "DELETED", node)  # a row after a write: still written next
        log.write(path)
        return path.read_bytes(), most

    spilled, most = log_of(3)
    kept, _ = log_of(10**6)
    assert most < 3
    assert spilled == kept and kept.count(b"\n") == 12  # header, 10 bindings, 1 deletion


# ------------------------------------------------------- the store's write path


def test_an_update_shares_what_it_did_not_change_and_copies_what_it_did(lone):
    _store_pods(lone, [_pod("a", 1, "Running")])
    before = lone._entry("pods", "default", "a").obj
    labels: dict[str, Any] = {"app": "x"}

    def edit(obj: dict) -> None:
        obj["status"]["phase"] = "Succeeded"
        obj["metadata"]["labels"] = labels  # the caller's own dict, kept by the caller

    lone.update("pods", "default", "a", edit, copy=False)
    after = lone._entry("pods", "default", "a").obj
    assert after["spec"] is before["spec"]  # unchanged: the stored version's own
    assert after["status"] is not before["status"] and after["status"]["phase"] == "Succeeded"
    assert after["metadata"] is not before["metadata"]
    assert before["status"]["phase"] == "Running"  # the old version is untouched
    assert before["metadata"]["resourceVersion"] != after["metadata"]["resourceVersion"]
    labels["app"] = "changed later"  # the store copied what the edit put in
    assert after["metadata"]["labels"] == {"app": "x"}
    assert lone.get("pods", "default", "a")["metadata"]["labels"] == {"app": "x"}


def test_an_update_that_puts_a_non_json_value_is_refused_and_stores_nothing(lone):
    from broker.facade.errors import ApiError

    _store_pods(lone, [_pod("a", 1, "Running")])
    rv = lone.resource_version
    for bad in ({1: "x"}, {"x": {1, 2}}, {"x": float("nan")}):
        with pytest.raises(ApiError) as exc:
            lone.update("pods", "default", "a", lambda o, bad=bad: o["status"].update(bad))
        assert exc.value.code == 400
    assert lone.resource_version == rv


# ------------------------------------------- a pass's choice without a walk of every pod


class _Listened:
    """Pod deletions that reach the controller's listener, as the store's would."""

    def __init__(self) -> None:
        self.gc: TerminatedPodGC | None = None
        self.deleted: list[str] = []
        self.refuse: set[str] = set()  # deletions that do not happen

    def delete_controlled_pod(self, namespace: str, name: str) -> None:
        if name in self.refuse:
            return
        self.deleted.append(name)
        assert self.gc is not None
        self.gc._on_change("pods", "DELETED", {"metadata": {"name": name, "namespace": namespace}})


def _lone_gc(threshold: int) -> tuple[TerminatedPodGC, _Clock, _Listened]:
    clock, pods = _Clock(), _Listened()
    gc = pods.gc = TerminatedPodGC(None, clock, pods)  # never started: fed by hand
    gc.threshold = threshold
    return gc, clock, pods


def _commit(gc: TerminatedPodGC, name: str, created_s: int, phase: str, evicted: bool) -> None:
    status: dict[str, Any] = {"phase": phase}
    if evicted:
        status["reason"] = "Evicted"
    meta = {
        "name": name,
        "namespace": "default",
        "creationTimestamp": format_time(created_s * 10**9),
    }
    gc._on_change("pods", "MODIFIED", {"metadata": meta, "status": status})


_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("commit"),
            st.sampled_from(["p0", "p1", "p2", "p3", "p4"]),
            st.integers(0, 5),  # creation second: ties broken by the name
            st.sampled_from(["Running", "Succeeded", "Failed"]),
            st.booleans(),
        ),
        st.tuples(st.just("delete"), st.sampled_from(["p0", "p1", "p2", "p3", "p4"])),
        st.tuples(st.just("pass"), st.integers(0, 4), st.sets(st.sampled_from(["p0", "p1"]))),
    ),
    max_size=60,
)


@given(_OPS)
def test_a_pass_deletes_what_nsmallest_over_every_terminated_pod_would(ops):
    """Against the reference (the ranks of every terminated pod, ``heapq.nsmallest``):
    pods terminated, changed, deleted and back, passes with deletions that fail."""
    import heapq

    gc, clock, pods = _lone_gc(0)
    for op in ops:
        if op[0] == "commit":
            _commit(gc, *op[1:])
        elif op[0] == "delete":
            gc._on_change("pods", "DELETED", {"metadata": {"name": op[1], "namespace": "default"}})
        else:
            gc.threshold, pods.refuse = op[1] + 1, op[2]
            live = dict(gc._terminated)
            expected = [r[2] for r in heapq.nsmallest(len(live) - gc.threshold, live.values())]
            pods.deleted.clear()
            clock.now += CHECK_PERIOD_NS
            gc.reconcile()
            assert pods.deleted == [n for n in expected if n not in pods.refuse]
            assert gc.terminated() == len(live) - len(pods.deleted)


def test_a_pod_whose_rank_changed_is_taken_at_its_new_rank():
    gc, clock, pods = _lone_gc(1)
    _commit(gc, "a", 1, "Succeeded", False)
    _commit(gc, "b", 2, "Succeeded", False)
    _commit(gc, "a", 3, "Succeeded", False)  # created later now (its stale rank stays below)
    assert gc.reconcile() and pods.deleted == ["b"]


def test_a_pod_gone_and_back_with_the_same_rank_is_deleted_once():
    gc, clock, pods = _lone_gc(1)
    _commit(gc, "a", 1, "Succeeded", False)
    gc._on_change("pods", "DELETED", {"metadata": {"name": "a", "namespace": "default"}})
    _commit(gc, "a", 1, "Succeeded", False)
    _commit(gc, "b", 2, "Succeeded", False)
    _commit(gc, "c", 3, "Succeeded", False)
    assert gc.reconcile() and pods.deleted == ["a", "b"]


def test_a_deletion_that_did_not_happen_is_tried_at_the_next_pass():
    gc, clock, pods = _lone_gc(1)
    _commit(gc, "a", 1, "Succeeded", False)
    _commit(gc, "b", 2, "Succeeded", False)
    pods.refuse = {"a"}
    assert gc.reconcile() and pods.deleted == [] and gc.terminated() == 2
    pods.refuse = set()
    clock.now += CHECK_PERIOD_NS
    assert gc.reconcile() and pods.deleted == ["a"]


def test_a_pass_takes_the_surplus_off_the_heap_and_no_more(monkeypatch):
    """A pass costs O(surplus · log n): it never orders every terminated pod (the
    10,000 here), and a pod's later commits (terminated still) do not grow the heap."""
    import heapq

    def walked(*args, **kwargs):
        raise AssertionError("a pass walked every terminated pod")

    gc, clock, pods = _lone_gc(9_997)
    for i in range(10_000):
        _commit(gc, f"p{i:05}", i, "Succeeded", False)
        _commit(gc, f"p{i:05}", i, "Succeeded", False)  # a second write, same rank
    assert len(gc._heap) == 10_000
    monkeypatch.setattr(heapq, "nsmallest", walked)
    monkeypatch.setattr(heapq, "heapify", walked)
    assert gc.reconcile() and pods.deleted == ["p00000", "p00001", "p00002"]
    assert len(gc._heap) == 9_997


def test_stale_heap_entries_are_dropped_when_they_outnumber_the_live_ones():
    gc, _, _ = _lone_gc(0)
    for i in range(3_000):
        _commit(gc, f"p{i}", i, "Succeeded", False)
        gc._on_change("pods", "DELETED", {"metadata": {"name": f"p{i}", "namespace": "default"}})
    assert gc.terminated() == 0 and len(gc._heap) <= 2 * 0 + 1_024 + 1


def test_a_collected_pod_is_deleted_without_being_decoded(tmp_path, monkeypatch):
    """The GC's deletions (``ControllerPods.delete_controlled_pod``) take the pod's last
    state from ``Store.remove``, shared: a ``get_or_none`` then a ``delete`` decoded it
    twice (issue 29, s7-bgrow) — and the kubelet still sees that state."""
    from broker.facade import store as store_module

    world = _run(tmp_path, 0)  # off: every pod is still stored
    try:
        namespace, name = next(iter(world.cluster.pods))
        before = world.store.get("pods", namespace, name)
        seen: list[Any] = []
        decoded: list[bytes] = []
        real_loads = store_module.json.loads
        monkeypatch.setattr(world.cluster.kubelet, "removed_pod", lambda *a: seen.append(a))
        monkeypatch.setattr(
            store_module.json, "loads", lambda s, *a, **k: decoded.append(s) or real_loads(s)
        )
        world.cluster.pod_ops.delete_controlled_pod(namespace, name)
        monkeypatch.undo()
        assert decoded == []
        assert seen == [(namespace, name, before)]
        assert world.store.get_or_none("pods", namespace, name) is None
        world.cluster.pod_ops.delete_controlled_pod(namespace, name)  # gone: nothing
        assert len(seen) == 1
    finally:
        world.close()


def test_store_remove_returns_the_state_before_and_commits_the_deletion(lone):
    store = lone
    _store_pods(store, [_pod("a", 1, "Succeeded")])
    before = store.get("pods", "default", "a")
    commits: list[tuple[str, str, str | None]] = []
    store.add_listener(
        lambda key, event, obj: commits.append(
            (event, obj["metadata"]["name"], obj["metadata"].get("deletionTimestamp"))
        ),
        ["pods"],
    )
    assert store.remove("pods", "default", "a") == before
    assert store.get_or_none("pods", "default", "a") is None
    assert [(e, n) for e, n, _ in commits] == [("DELETED", "a")]
    assert commits[0][2] is not None  # stamped, as delete() does
    assert store.remove("pods", "default", "a") is None
    assert len(commits) == 1
