"""The broker's metrics refresh works on what changed, yet publishes exactly what a full
recomputation (every node, every running pod, at every refresh) would: same samples,
same values, same timestamps. And ``all_done`` agrees with a scan of every job."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from procset import ProcSet

from broker.cluster.cluster import Cluster
from broker.cluster.metrics_publisher import _bytes, _curve
from broker.facade import Facade
from broker.facade.clock import ManualClock
from broker.facade.metrics import MetricsBoard
from simulator import protocol as p
from simulator.testing import simulation_begins

NODES = 3
CURVE = {"cpu": [[0, 0.25], [30, 0.75], [90, "500m"]], "memory": [[0, "64Mi"], [60, "1Gi"]]}
PERIODIC = {"cpu": [[0, 1], [10, 0.5]], "period": 40}


class FullRecompute:
    """The reference: the broker's former refresh, O(nodes + running pods) each time."""

    def __init__(self) -> None:
        self.board = MetricsBoard()
        self.at: int | None = None
        self.node_usage: dict[str, list[int]] = {}
        self.pod_usage: dict[tuple[str, str], tuple[int, int]] = {}

    def refresh(self, cluster: Cluster, now: int, forced: bool) -> None:
        if self.at == now and not forced:
            return
        self.at = now
        per_node = {name: [0, 0] for name in cluster.nodes}
        for key in [k for k in self.pod_usage if k not in cluster.metrics.running]:
            del self.pod_usage[key]
            self.board.remove_pod(*key)
        for jp in cluster.metrics.running.values():
            cpu_n, mem = jp.cpu_m * 1_000_000, jp.memory
            if jp.usage and jp.started_ns is not None:
                elapsed = (now - jp.started_ns) / 1e9
                period = jp.usage.get("period")
                cpu_n = int(float(_curve(jp.usage.get("cpu"), elapsed, period, cpu_n / 1e9)) * 1e9)
                mem = _bytes(_curve(jp.usage.get("memory"), elapsed, period, mem))
            key = (jp.namespace, jp.name)
            if self.pod_usage.get(key) != (cpu_n, mem):
                self.pod_usage[key] = (cpu_n, mem)
                self.board.set_pod(*key, {"main": (cpu_n, mem)}, timestamp_ns=now, labels=jp.labels)
            if jp.node in per_node:
                per_node[jp.node][0] += cpu_n
                per_node[jp.node][1] += mem
        for name, usage in per_node.items():
            if self.node_usage.get(name) != usage:
                self.node_usage[name] = list(usage)
                self.board.set_node(
                    name, *usage, timestamp_ns=now, labels=cluster.nodes[name].labels
                )


def _board(board: MetricsBoard):
    return board.node_items(), board.pod_items(None)


def _begin(n: int) -> p.SimulationBegins:
    hosts = [{"id": i, "name": f"node-{i}", "properties": {"core": "2"}} for i in range(n)]
    return simulation_begins(
        hosts,
        {
            "plain": {"type": "delay", "delay": 10, "cpu": "500m", "memory": "128Mi"},
            "curve": {"type": "delay", "delay": 10, "cpu": 1, "timewarp": {"usage": CURVE}},
            "periodic": {"type": "delay", "delay": 10, "timewarp": {"usage": PERIODIC}},
        },
        workload="w",
    )


operations = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(["submit", "start"]),
            st.sampled_from(["plain", "curve", "periodic"]),
            st.integers(0, NODES - 1),
        ),
        st.tuples(st.just("bind"), st.integers(0, 40), st.integers(0, NODES - 1)),
        st.tuples(st.just("complete"), st.integers(0, 40)),
        st.tuples(st.just("delete"), st.integers(0, 40)),
        st.tuples(st.just("advance"), st.integers(0, 50)),
        st.tuples(st.just("refresh")),
    ),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(operations)
def test_incremental_metrics_equal_a_full_recomputation(ops):
    clock = ManualClock()
    facade = Facade(clock)
    cluster = Cluster(facade, clock.now_ns)
    reference = FullRecompute()
    cluster.begin(_begin(NODES))
    submitted: list[str] = []
    records = {}  # job id -> its JobPod (an ended job leaves cluster.jobs)

    def refresh(forced: bool = False) -> None:
        cluster.refresh_metrics()
        reference.refresh(cluster, clock.now_ns(), forced)
        assert _board(facade.metrics) == _board(reference.board)

    refresh()
    for op in ops:
        if op[0] in ("submit", "start"):
            job_id = f"w!{len(submitted)}"
            cluster.submit(p.JobSubmitted(job_id, {"id": job_id, "profile": op[1]}))
            submitted.append(job_id)
            records[job_id] = cluster.jobs[job_id]
            if op[0] == "start":  # submitted and bound at once
                op = ("bind", len(submitted) - 1, op[2])
        if op[0] in ("bind", "complete", "delete") and submitted:
            jp = records[submitted[op[1] % len(submitted)]]
            if op[0] == "bind" and jp.state == "pending":
                node = f"node-{op[2]}"
                facade.store.bind(jp.namespace, jp.name, node)
                cluster.inbox.on_bind(jp.namespace, jp.name, node)
                changed = cluster.process()
            elif op[0] == "complete" and jp.state == "running":
                cluster.complete(p.JobCompleted(jp.job_id, "COMPLETED_SUCCESSFULLY", 0, ProcSet()))
                changed = True
            elif op[0] == "delete" and jp.state in ("pending", "running"):
                cluster.inbox.on_remove(jp.namespace, jp.name)
                facade.store.delete("pods", jp.namespace, jp.name)
                changed = cluster.process()
            else:
                continue
            if changed:  # what the broker does after the kubelet acted: refresh at once
                refresh(forced=True)
        elif op[0] == "advance" and op[1]:
            clock.advance(op[1] * 1_000_000_000)
            refresh()
        elif op[0] == "refresh":
            refresh()
    cluster.all_submitted = True
    assert cluster.all_done() == all(j.state in ("done", "rejected") for j in records.values())
    assert set(cluster.jobs) == {
        i for i, j in records.items() if j.state not in ("done", "rejected")
    }


def test_all_done_follows_jobs_finishing_in_any_order():
    clock = ManualClock()
    facade = Facade(clock)
    cluster = Cluster(facade, clock.now_ns)
    cluster.begin(_begin(1))

    def submit(job_id: str) -> None:
        cluster.submit(p.JobSubmitted(job_id, {"id": job_id, "profile": "plain"}))

    def run(job_id: str) -> None:
        jp = cluster.jobs[job_id]
        facade.store.bind(jp.namespace, jp.name, "node-0")
        cluster.inbox.on_bind(jp.namespace, jp.name, "node-0")
        cluster.process()

    def finish(job_id: str) -> None:
        cluster.complete(p.JobCompleted(job_id, "COMPLETED_SUCCESSFULLY", 0, ProcSet()))

    for i in range(3):
        submit(f"w!{i}")
    assert not cluster.all_done()  # not everything submitted yet
    cluster.all_submitted = True
    assert not cluster.all_done()
    run("w!2")
    finish("w!2")
    jp = cluster.jobs["w!0"]  # deleted while pending: rejected
    cluster.inbox.on_remove(jp.namespace, jp.name)
    facade.store.delete("pods", jp.namespace, jp.name)
    cluster.process()
    assert jp.state == "rejected" and "w!0" not in cluster.jobs  # ended: forgotten
    assert not cluster.all_done()
    run("w!1")
    finish("w!1")
    assert cluster.all_done()
    submit("w!3")  # a late job
    assert not cluster.all_done()
    run("w!3")
    finish("w!3")
    assert cluster.all_done()
