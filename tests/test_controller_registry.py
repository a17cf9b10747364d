"""The controllers come from one registry (``broker/controllers/registry.py``): the
cluster makes, starts and reconciles whatever it lists, in its order. A toy controller
(``tests/toy_controller.py``, one new file) registered with one line runs in a
simulation; and ``Cluster`` stays small, its parts in their own modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from toy_controller import CENSUS, PodCensusController

from broker.controllers import registry
from broker.controllers.deployment import DeploymentController
from broker.controllers.job import JobController
from broker.controllers.podgc import PodGCController
from broker.controllers.replicaset import ReplicaSetController
from broker.controllers.terminated_gc import TerminatedPodGC
from broker.drivers.inprocess import InProcessRun

ROOT = Path(__file__).resolve().parent.parent
JOBS = [{"id": str(i), "subtime": 0, "res": 1, "profile": "short"} for i in range(3)]
PROFILES = {"short": {"type": "delay", "delay": 10, "cpu": "1", "scheduler": "default"}}


def test_the_registry_lists_the_controllers_in_their_order_of_reconciliation():
    assert list(registry.CONTROLLERS.items()) == [
        ("job-controller", JobController),
        ("deployment-controller", DeploymentController),
        ("replicaset-controller", ReplicaSetController),
        ("pod-garbage-collector-controller", PodGCController),
        (registry.TERMINATED_POD_GC, TerminatedPodGC),  # after those that count ended pods
    ]


def test_a_toy_controller_added_with_one_line_runs_in_a_simulation(tmp_path, monkeypatch):
    monkeypatch.setitem(registry.CONTROLLERS, "pod-census", PodCensusController)  # the line
    world = InProcessRun(tmp_path, nodes=2, cores=2)
    seen = {}
    try:
        assert isinstance(world.cluster.controllers["pod-census"], PodCensusController)

        def before(message) -> None:  # at t=5 s, all three pods run
            if any(e.type == "SIMULATION_BEGINS" for e in message.events):
                world.clock.call_at(
                    5 * 10**9,
                    lambda: seen.update(mid=world.store.get("configmaps", "default", CENSUS)),
                )

        sim = world.run(JOBS, PROFILES, before=before)
        assert sim.ended
        final = world.store.get("configmaps", "default", CENSUS)
    finally:
        world.close()
    assert seen["mid"]["data"] == {"Running": "3"}
    assert final["data"] == {"Succeeded": "3"}
    assert [r["final_state"] for r in world.rows()] == ["COMPLETED_SUCCESSFULLY"] * 3


def test_without_its_line_the_toy_controller_does_not_run(tmp_path):
    world = InProcessRun(tmp_path, nodes=2, cores=2)
    try:
        world.run(JOBS, PROFILES)
        assert world.store.get_or_none("configmaps", "default", CENSUS) is None
    finally:
        world.close()


@pytest.mark.parametrize("limit", [25])
def test_the_cluster_keeps_few_methods_and_names_no_controller(limit):
    source = (ROOT / "broker" / "cluster" / "cluster.py").read_text()
    tree = ast.parse(source)
    (cluster,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Cluster"]
    methods = [n.name for n in cluster.body if isinstance(n, ast.FunctionDef)]
    assert len(methods) < limit, methods
    for name in registry.CONTROLLERS:
        assert registry.CONTROLLERS[name].__name__ not in source
