"""The official client, old and new, end to end against the facade on a free port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import test_facade_client_scenarios as scenarios  # tests/ is on sys.path under pytest

from broker.facade import Facade, ManualClock, podstatus
from broker.facade.objects import make_node

ROOT = Path(__file__).resolve().parent.parent
OLD_CLIENT = ROOT / ".venv" / "k8s24"
TOKEN_NAME = "scenarios"


class ParkedDriver:
    """The broker's part in the scenarios: advance virtual time once the client's watch is
    parked (no request in flight, nothing queued) and the store shows what it waits for."""

    def __init__(self, facade: Facade, clock: ManualClock) -> None:
        self.facade, self.clock = facade, clock
        self._wake = threading.Event()
        facade.add_idle_listener(lambda port: self._wake.set())
        self.errors: list[str] = []
        self.threads: list[threading.Thread] = []

    def _ready(self, pods_in, label, unbound_in=None) -> bool:
        stats = self.facade.token_stats(TOKEN_NAME)
        if stats.watches < 1 or stats.in_flight != 0:
            return False
        if any(c["queued"] or c["handling"] for c in self.facade.ledger.snapshot().values()):
            return False
        if pods_in and len(self.facade.store.list("pods", pods_in[0])[0]) < pods_in[1]:
            return False
        if unbound_in:
            ns, scheduler = unbound_in
            if self.facade.store.list(
                "pods", ns, field_selector=f"spec.nodeName=,spec.schedulerName={scheduler}"
            )[0]:
                return False
        if label:
            pod = self.facade.store.get_or_none("pods", label[0], label[1]) or {}
            if (pod.get("metadata", {}).get("labels") or {}).get(label[2]) != label[3]:
                return False
        return True

    def _run(self, seconds, pods_in, label, unbound_in) -> None:
        for _ in range(400):  # bounded: 400 wake-ups or 0.05 s waits, ~20 s at most
            if self._ready(pods_in, label, unbound_in):
                self.clock.advance(int(seconds * 1e9))
                return
            self._wake.wait(0.05)
            self._wake.clear()
        self.errors.append(f"watch never parked (advance {seconds}s, {pods_in}, {label})")

    def advance_when_parked(
        self, seconds: float, pods_in=None, label=None, unbound_in=None
    ) -> None:
        t = threading.Thread(
            target=self._run, args=(seconds, pods_in, label, unbound_in), daemon=True
        )
        self.threads.append(t)
        t.start()


def make_lifecycle_pods(store) -> None:
    """Pods in every state the broker's kubelet model writes (see podstatus.py)."""
    spec = {
        "containers": [
            {"name": "main", "image": "busybox:1.36"},
            {"name": "side", "image": "pause"},
        ]
    }
    rs = store.create(
        "replicasets.apps",
        {
            "metadata": {"name": "owner"},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": spec},
            },
        },
        namespace="lifecycle",
    )
    for name in ("running", "succeeded", "failed", "rejected"):
        store.create(
            "pods",
            {
                "metadata": {"name": name, "ownerReferences": [podstatus.owner_reference(rs)]},
                "spec": spec,
            },
            namespace="lifecycle",
        )
        if name != "rejected":
            store.bind("lifecycle", name, "node-0")
            store.update(
                "pods",
                "lifecycle",
                name,
                lambda p: podstatus.mark_running(p, now=store.timestamp(), host_ip="10.0.0.1"),
            )
    store.update(
        "pods",
        "lifecycle",
        "succeeded",
        lambda p: podstatus.mark_finished(p, now=store.timestamp(), succeeded=True),
    )
    store.update(
        "pods",
        "lifecycle",
        "failed",
        lambda p: podstatus.mark_finished(
            p, now=store.timestamp(), succeeded=False, exit_code=137, reason="OOMKilled"
        ),
    )
    store.update(
        "pods",
        "lifecycle",
        "rejected",
        lambda p: podstatus.mark_rejected(
            p,
            now=store.timestamp(),
            reason="OutOfcpu",
            message="Pod Node didn't have enough resource: cpu, requested: 8000, used: 0, capacity: 4000",
        ),
    )


@pytest.fixture
def cluster(tmp_path):
    clock = ManualClock()
    facade = Facade(clock, history_limit=50, bookmark_interval_s=60)
    for i, zone in enumerate("aba"):
        facade.store.create("nodes", make_node(f"node-{i}", labels={"zone": zone}))
    facade.set_node_metrics("node-0", 250_000_000, 123456 * 1024)
    facade.set_node_metrics("node-1", 1_500_000_000, 2 * 1024**3)
    facade.set_pod_metrics("default", "busy", {"main": (100_000_000, 2 * 1024**2)})
    make_lifecycle_pods(facade.store)
    kubeconfig = facade.write_kubeconfig(tmp_path / "kubeconfig", TOKEN_NAME)
    with facade:
        yield facade, clock, kubeconfig


@pytest.mark.parametrize("name", sorted(scenarios.SCENARIOS))
def test_newest_client_scenario(cluster, name):
    from kubernetes import config

    facade, clock, kubeconfig = cluster
    driver = ParkedDriver(facade, clock)
    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        scenarios.SCENARIOS[name](api, driver)
    finally:
        api.close()
    for t in driver.threads:
        t.join(timeout=20)
    assert not driver.errors


def test_watch_timeouts_elapse_in_virtual_time(cluster):
    from kubernetes import config

    facade, clock, kubeconfig = cluster
    driver = ParkedDriver(facade, clock)
    api = config.new_client_from_config(config_file=str(kubeconfig))
    with api:
        scenarios.scenario_watch(api, driver)
    # 30 + 30 + 30 + 150 virtual seconds of watch timeouts.
    assert clock.now_ns() == 240 * 10**9


@pytest.mark.skipif(
    not (OLD_CLIENT / "kubernetes").is_dir(),
    reason="run scripts/setup-venv.sh: .venv/k8s24 missing",
)
def test_old_client_24_runs_every_scenario(cluster, subprocess_env):
    facade, clock, kubeconfig = cluster
    driver = ParkedDriver(facade, clock)
    env = dict(subprocess_env)
    env["PYTHONPATH"] = os.pathsep.join([str(OLD_CLIENT), str(ROOT)])
    script = Path(scenarios.__file__)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(kubeconfig), *sorted(scenarios.SCENARIOS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    outcome = []
    for line in proc.stdout:
        if line.startswith("ADVANCE_WHEN_PARKED "):
            request = json.loads(line.split(" ", 1)[1])
            driver.advance_when_parked(
                request["seconds"], request["pods_in"], request["label"], request["unbound_in"]
            )
        else:
            outcome.append(line.strip())
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, "\n".join(outcome) + "\n" + stderr
    assert "kubernetes 24" not in stderr
    assert sorted(outcome) == sorted(f"PASSED {n}" for n in scenarios.SCENARIOS)
    assert not driver.errors


def test_shared_informer_of_the_newest_client_follows_pods(cluster):
    pytest.importorskip("kubernetes.informer")
    from kubernetes import client, config
    from kubernetes.informer import SharedInformer

    facade, clock, kubeconfig = cluster
    api = config.new_client_from_config(config_file=str(kubeconfig))
    facade.store.create(
        "pods",
        {"metadata": {"name": "before"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
        namespace="default",
    )
    seen: list[tuple[str, str]] = []
    changed = threading.Condition()

    def record(kind):
        def handler(obj):
            with changed:
                seen.append((kind, obj.metadata.name))
                changed.notify_all()

        return handler

    informer = SharedInformer(client.CoreV1Api(api).list_namespaced_pod, namespace="default")
    for kind in ("ADDED", "MODIFIED", "DELETED"):
        informer.add_event_handler(kind, record(kind))
    informer.start()

    def wait_for(n):
        with changed:
            assert changed.wait_for(lambda: len(seen) >= n, timeout=10), seen

    wait_for(1)
    facade.store.create(
        "pods",
        {"metadata": {"name": "after"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
        namespace="default",
    )
    wait_for(2)
    facade.store.bind("default", "after", "node-1")
    wait_for(3)
    facade.store.delete("pods", "default", "before")
    wait_for(4)
    assert seen == [
        ("ADDED", "before"),
        ("ADDED", "after"),
        ("MODIFIED", "after"),
        ("DELETED", "before"),
    ]
    assert informer.cache.get_by_key("default/after").spec.node_name == "node-1"
    informer._stop_event.set()
    facade.store.create(
        "pods",
        {"metadata": {"name": "wake"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
        namespace="default",
    )
    informer.stop()
    api.close()
