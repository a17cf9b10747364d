"""JOB_COMPLETED on the cluster side (``Cluster.complete``): the pod turns Succeeded in one
write, with no read of the whole pod before it (once per pod: a copy and its decode), and
a pod already gone from the store (deleted meanwhile) is left alone."""

from __future__ import annotations

import pytest

from broker.cluster.cluster import Cluster
from broker.facade import Facade
from broker.facade.clock import ManualClock
from broker.facade.store import Store
from simulator import protocol as p
from simulator.testing import simulation_begins


@pytest.fixture
def running():
    """A cluster whose one pod runs (bound and admitted) on node-0."""
    facade = Facade(ManualClock())
    cluster = Cluster(facade, facade.clock.now_ns)
    host = {"id": 0, "name": "node-0", "properties": {"core": "2"}}
    cluster.begin(simulation_begins([host], {"one": {"type": "delay", "delay": 10, "cpu": "1"}}))
    cluster.submit(p.JobSubmitted("w0!0", {"id": "w0!0", "profile": "one"}))
    jp = cluster.jobs["w0!0"]
    facade.store.bind(jp.namespace, jp.name, "node-0")
    cluster.kubelet.admit(jp.namespace, jp.name, "node-0")
    assert jp.state == "running"
    cluster.take_decisions()
    return facade, cluster, jp


def _completed() -> p.JobCompleted:
    return p.JobCompleted("w0!0", "COMPLETED_SUCCESSFULLY", 0, p.ProcSet())


def test_a_completed_job_s_pod_succeeds_without_a_read_first(running, monkeypatch):
    facade, cluster, jp = running
    reads = []
    real = Store.get_or_none
    monkeypatch.setattr(Store, "get_or_none", lambda *a: reads.append(a) or real(*a))
    cluster.complete(_completed())
    assert reads == []
    pod = facade.store.get("pods", jp.namespace, jp.name)
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert cluster.stats.jobs_done == 1 and jp.state == "done"


def test_a_pod_deleted_before_its_job_completed_is_left_alone(running):
    facade, cluster, jp = running
    facade.store.delete("pods", jp.namespace, jp.name)  # behind the kubelet model's back
    revision = facade.store.resource_version
    cluster.complete(_completed())
    assert facade.store.get_or_none("pods", jp.namespace, jp.name) is None
    assert facade.store.resource_version == revision  # nothing written
    assert cluster.stats.jobs_done == 1 and jp.state == "done"
