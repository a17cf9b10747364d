"""The pod garbage collector (``broker/controllers/podgc.py``), as kube-controller-
manager's PodGC: a deleted node's pods are failed and force-deleted once the node is
really gone (the first 20 s tick after the deletion, then 40 s of quarantine), their
Batsim jobs killed; unscheduled terminating pods and terminating pods on out-of-service
nodes go at the next tick; a run that gives it nothing to collect never wakes it."""

from __future__ import annotations

import csv
import subprocess
import sys
from typing import Any

import pytest
from simrun import ROOT, run_simulate

from broker.controllers import podgc
from broker.drivers.inprocess import InProcessRun
from simulator.testing import write_platform, write_workload

NS = 10**9
GC = "pod-garbage-collector-controller"
DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"


def _jobs(n: int, profile: str = "long") -> list[dict[str, Any]]:
    return [{"id": str(i), "subtime": 0, "res": 1, "profile": profile} for i in range(n)]


PROFILES = {"long": {"type": "delay", "delay": 100, "cpu": "1", "scheduler": "default"}}


def _at(world: InProcessRun, seconds: float, action) -> Any:
    """``action()`` at ``seconds`` of virtual time (armed at SIMULATION_BEGINS)."""

    def before(message) -> None:
        if any(e.type == "SIMULATION_BEGINS" for e in message.events):
            world.clock.call_at(round(seconds * NS), action)

    return before


def _last_states(world: InProcessRun) -> dict[str, dict[str, Any]]:
    """The last state of every pod the store held (a deleted pod: as it was deleted)."""
    last: dict[str, dict[str, Any]] = {}

    def listen(key: str, event: str, obj: dict[str, Any]) -> None:
        if key == "pods":
            last[obj["metadata"]["name"]] = {"event": event, "obj": obj}

    world.store.add_listener(listen)
    return last


@pytest.mark.parametrize(("deleted_at", "collected_at"), [(5, 60.0), (20, 60.0), (21, 80.0)])
def test_a_deleted_nodes_pods_are_failed_deleted_and_their_jobs_killed(
    tmp_path, deleted_at, collected_at
):
    world = InProcessRun(tmp_path, nodes=2, cores=2)
    last = _last_states(world)
    try:
        before = _at(world, deleted_at, lambda: world.store.delete("nodes", None, "n000"))
        assert world.run(_jobs(3), PROFILES, before=before).ended
        rows = {r["job_id"]: r for r in world.rows()}
        kills = world.sent("KILL_JOB")
    finally:
        world.close()
    # the binder put pods 0 and 2 on n000, pod 1 on n001
    assert kills == [(collected_at, {"job_ids": ["w0!0"]}), (collected_at, {"job_ids": ["w0!2"]})]
    assert {j: (r["final_state"], float(r["finish_time"])) for j, r in rows.items()} == {
        "0": ("COMPLETED_KILLED", collected_at),
        "1": ("COMPLETED_SUCCESSFULLY", 100.0),
        "2": ("COMPLETED_KILLED", collected_at),
    }
    gone = [s for s in last.values() if s["event"] == "DELETED"]
    assert len(gone) == 2
    for state in gone:
        status = state["obj"]["status"]
        assert status["phase"] == "Failed"
        (cond,) = [c for c in status["conditions"] if c["type"] == "DisruptionTarget"]
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "True",
            "DeletionByPodGC",
            "PodGC: node no longer exists",
        )


def test_a_pod_bound_to_a_deleted_node_is_never_started_and_is_collected(tmp_path):
    """No kubelet runs on a deleted node: a pod bound there after the deletion stays
    Pending, an orphan, until the collector deletes it (its job rejected)."""
    world = InProcessRun(tmp_path, nodes=2, cores=2)
    try:
        world.bind_enabled = False

        def delete_then_bind() -> None:
            world.store.delete("nodes", None, "n000")
            (pod,) = world.store.list("pods")[0]
            name = pod["metadata"]["name"]
            world.cluster.inbox.on_bind("default", name, "n000")
            world.store.bind("default", name, "n000", copy=False)

        assert world.run(_jobs(1), PROFILES, before=_at(world, 1, delete_then_bind)).ended
        rejected = world.sent("REJECT_JOB")
        assert world.sent("EXECUTE_JOB") == []
    finally:
        world.close()
    assert rejected == [(60.0, {"job_id": "w0!0"})]


def test_an_unscheduled_terminating_pod_is_deleted_at_the_next_tick(tmp_path):
    world = InProcessRun(tmp_path, nodes=1, cores=2)
    try:
        world.bind_enabled = False

        def terminating() -> None:  # (the API deletes an unbound pod at once: the store's)
            (pod,) = world.store.list("pods")[0]
            stamp = world.store.timestamp()
            world.store.update(
                "pods",
                "default",
                pod["metadata"]["name"],
                lambda o: o["metadata"].update(deletionTimestamp=stamp),
            )

        assert world.run(_jobs(1), PROFILES, before=_at(world, 25, terminating)).ended
        rejected = world.sent("REJECT_JOB")
    finally:
        world.close()
    assert rejected == [(40.0, {"job_id": "w0!0"})]


def test_a_terminating_pod_on_an_out_of_service_node_is_deleted(tmp_path):
    profiles = {
        "slow-stop": {
            "type": "delay", "delay": 1000, "cpu": "1", "scheduler": "default",
            "timewarp": {"shutdownSeconds": 500},
            "pod": {"spec": {"terminationGracePeriodSeconds": 600}},
        }
    }  # fmt: skip
    world = InProcessRun(tmp_path, nodes=1, cores=2)
    try:

        def delete_pod() -> None:
            (pod,) = world.store.list("pods")[0]
            world.cluster.pod_ops.terminate_pod("default", pod["metadata"]["name"])

        def out_of_service() -> None:
            def mark(node: dict[str, Any]) -> None:
                taint = {
                    "key": podgc.OUT_OF_SERVICE,
                    "value": "nodeshutdown",
                    "effect": "NoExecute",
                }
                node["spec"]["taints"] = [*(node["spec"].get("taints") or []), taint]
                for cond in node["status"]["conditions"]:
                    if cond["type"] == "Ready":
                        cond["status"] = "False"

            world.store.update("nodes", None, "n000", mark)

        def before(message) -> None:
            if any(e.type == "SIMULATION_BEGINS" for e in message.events):
                world.clock.call_at(5 * NS, delete_pod)
                world.clock.call_at(50 * NS, out_of_service)

        assert world.run(_jobs(1, "slow-stop"), profiles, before=before).ended
        kills = world.sent("KILL_JOB")
    finally:
        world.close()
    assert kills == [(60.0, {"job_ids": ["w0!0"]})]  # not at 505 (its shutdown)


def test_a_run_with_nothing_to_collect_never_wakes_the_collector(tmp_path):
    world = InProcessRun(tmp_path, nodes=2, cores=2)
    try:
        assert world.run(_jobs(3), PROFILES).ended
        collector = world.cluster.controllers[GC]
        calls = world.sent("CALL_ME_LATER")
    finally:
        world.close()
    assert collector._last_pass_ns is None
    assert calls == []


def test_a_retired_nodes_bare_pods_are_collected_in_a_simulation(tmp_path, subprocess_env):
    """An operator's script (official client) cordons n000 at t=100, evicts the pod a
    ReplicaSet re-creates, leaves the bare one, deletes the Node and waits until no pod
    is bound to it: the collector fails and deletes the bare pod 40 s later (the tick at
    100, then the quarantine), its job killed; the run is the same twice."""
    platform = write_platform(tmp_path / "p.xml", 2, cores=2)
    profile = {"type": "delay", "delay": 300, "cpu": "1", "scheduler": "default"}
    jobs = [
        {"id": str(i), "subtime": 0, "res": 1, "profile": "d", **({"replicaset": "web"} if i < 2 else {})}
        for i in range(4)
    ]  # fmt: skip
    workload = write_workload(tmp_path / "w.json", jobs, {"d": profile})
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, DEFAULT_LIKE, platform, workload,
        "--scheduler", "python tests/programs/retire_node.py n000 100", "--check-determinism",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    assert (out / "scheduler-1.log").read_text().splitlines() == [
        "cordoned n000",
        "evicted default/w0.0",
        "not evicting default/w0.2: no controller would re-create it",
        "deleted node n000",
        "no pod left on n000 after 45s",  # polled every 5 s: gone at 140
    ]
    with open(out / "out_decisions.csv", newline="") as handle:
        rows = [
            (r["time"], r["actor"], r["action"], r["name"], r["detail"])
            for r in csv.DictReader(handle)
        ]
    assert ("140", "kube-controller-manager", "delete", "w0.2", "DeletionByPodGC") in rows
    with open(out / "out_jobs.csv", newline="") as handle:
        jobs_out = {
            r["job_id"]: (r["final_state"], r["finish_time"]) for r in csv.DictReader(handle)
        }
    assert jobs_out["2"] == ("COMPLETED_KILLED", "140.000000")
    assert jobs_out["0"] == ("COMPLETED_KILLED", "100.000000")  # evicted, then replaced
    assert jobs_out["0~r1"][0] == "COMPLETED_SUCCESSFULLY"
    story = subprocess.run(
        [sys.executable, "-m", "timewarp", "explain", str(out), "w0!2"],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "t=       140 s  deleted by kube-controller-manager (DeletionByPodGC)" in story.stdout


def test_a_workload_replicasets_pod_collected_by_podgc_is_replaced(tmp_path):
    """Failed by the collector (DisruptionTarget), the pod had not done its work: its
    ReplicaSet replaces it, as the real one replaces any pod no longer active."""
    jobs = [
        {"id": str(i), "subtime": 0, "res": 1, "profile": "long", "replicaset": "web"}
        for i in range(2)
    ]
    world = InProcessRun(tmp_path, nodes=2, cores=2)
    try:
        before = _at(world, 5, lambda: world.store.delete("nodes", None, "n000"))
        assert world.run(jobs, PROFILES, before=before).ended
        registered = [d["job"]["id"] for _, d in world.sent("REGISTER_JOB")]
        rows = {r["job_id"]: r["final_state"] for r in world.rows()}
    finally:
        world.close()
    assert registered == ["w0!0~r1"]  # n000's pod, killed at 60, restarted on n001
    assert rows == {
        "0": "COMPLETED_KILLED",
        "1": "COMPLETED_SUCCESSFULLY",
        "0~r1": "COMPLETED_SUCCESSFULLY",
    }
