"""The controllers the simulated cluster runs, in the order it runs them — as
kube-controller-manager's ``NewControllerDescriptors`` lists its initializers.

A new controller is one file (a :class:`~broker.controllers.base.KeyedController`
subclass; its constructor takes the store, the clock and the cluster's
:class:`~broker.controllers.base.PodOps`) and one line here. The cluster
(``broker/cluster/cluster.py``) makes one of each at construction, starts them at
SIMULATION_BEGINS and, at every step, reconciles them in this order; a controller whose
``keeps_simulation_alive`` says so holds up ``registration_finished``.

The order is part of a run's outputs (a Deployment's ReplicaSet is scaled before the
ReplicaSet controller makes its pods, in the same step): append, do not reorder.
"""

from __future__ import annotations

from typing import Any

from broker.controllers.base import KeyedController, PodOps
from broker.controllers.deployment import DeploymentController
from broker.controllers.job import JobController
from broker.controllers.podgc import PodGCController
from broker.controllers.replicaset import ReplicaSetController
from broker.controllers.terminated_gc import TerminatedPodGC
from broker.facade.store import Store

# kube-controller-manager's PodGC, its terminated-pod half (broker/controllers/terminated_gc.py)
TERMINATED_POD_GC = "pod-garbage-collector-terminated"
# name (kube-controller-manager's) -> the controller's class
CONTROLLERS: dict[str, type[KeyedController[Any]]] = {
    "job-controller": JobController,
    "deployment-controller": DeploymentController,
    "replicaset-controller": ReplicaSetController,
    "pod-garbage-collector-controller": PodGCController,
    # after the controllers that count terminated pods: they counted a pod when it ended
    TERMINATED_POD_GC: TerminatedPodGC,
}


def build(store: Store, clock: Any, pods: PodOps) -> dict[str, KeyedController[Any]]:
    """One of each registered controller, by name, in the registry's order."""
    return {name: cls(store, clock, pods) for name, cls in CONTROLLERS.items()}
