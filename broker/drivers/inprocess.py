"""The broker against the embedded simulator in one process, with a built-in binder: for
tests and benchmarks of the cluster model (controllers, dynamic jobs) without a scheduler
process or sockets to Batsim.

Each Batsim message goes through the real codec to :meth:`Broker.step` (deterministic
mode) and the reply back to :class:`simulator.engine.Simulator`. The binder plays a
first-fit scheduler: after every ``Cluster.process()`` it binds each unbound Pending pod
(oldest first) to the node with the most free cpu, through the same hook and store call as
the binding endpoint. No HTTP, no clock clients: quiescence is immediate.

Limits: the binder ignores node selectors, taints and memory; it is a stand-in for a
scheduler, not a model of one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import zmq

from broker.clock.service import ClockService, FacadeClock
from broker.cluster import kubelet_admission as admission
from broker.drivers.engine import Broker
from broker.facade import Facade
from broker.processes.launcher import Launcher
from simulator import local_link
from simulator import protocol as p
from simulator.engine import Simulator
from simulator.inputs import make_sim, write_platform, write_workload
from simulator.outputs import jobs_rows
from simulator.runner import run as run_runner


class InProcessRun:
    """One simulation: ``nodes`` compute hosts of ``cores`` cores each, in ``workdir``."""

    def __init__(
        self, workdir: Path, nodes: int = 2, cores: int = 2, endpoint: str = "tcp://127.0.0.1:*"
    ) -> None:
        self.tmp = workdir
        self.platform = write_platform(workdir / "platform.xml", nodes, cores)
        self.clock = ClockService()
        self.facade = Facade(FacadeClock(self.clock)).start()
        launcher = Launcher(clock=self.clock, facade=self.facade, out_dir=workdir)
        self.broker = Broker(
            endpoint=endpoint, clock=self.clock, facade=self.facade, launcher=launcher
        )
        self.cluster = self.broker.cluster
        # The binder binds from inside Cluster.process(): its bindings are admitted by
        # the next process() call, as in lockstep mode, not within the binding.
        self.cluster.admit_bindings_at_once(False)
        self.store = self.facade.store
        self.replies: list[dict[str, Any]] = []
        self.bind_enabled = True
        self.sim: Simulator | None = None
        original = self.cluster.process

        def process_then_bind() -> bool:
            did = original()
            return self._bind_pending() or did

        self.cluster.process = process_then_bind  # type: ignore[method-assign]

    def _bind_pending(self) -> bool:
        if not self.bind_enabled or not self.cluster.nodes:
            return False
        kubelet = self.cluster.kubelet
        free = {
            n.name: n.cpu_m - n.used_cpu_m
            for n in self.cluster.nodes.values()
            if not kubelet.node_deleted(n.name)  # a scheduler sees only existing Nodes
        }
        if not free or max(free.values()) <= 0:
            return False  # a full cluster: no need to look at the queue
        pods, _ = self.store.list("pods", field_selector="spec.nodeName=,status.phase=Pending")
        pods.sort(key=lambda q: (q["metadata"]["creationTimestamp"], q["metadata"]["name"]))
        bound = False
        for pod in pods:
            ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            need = admission.pod_requests(pod).get("cpu", 0)
            node = max(sorted(free), key=lambda n: free[n])
            if free[node] < need:
                continue
            self.cluster.inbox.on_bind(ns, name, node)  # what the binding endpoint does
            self.store.bind(ns, name, node, copy=False)
            free[node] -= need
            bound = True
        return bound

    def _make_sim(self, jobs: list[dict[str, Any]], profiles: dict[str, Any], dynamic: bool):
        workload = write_workload(self.tmp / "workload.json", jobs, profiles)
        self.sim = make_sim(
            self.platform,
            [workload],
            allow_compute_sharing=True,
            dynamic_jobs=dynamic,
            profile_reuse=dynamic,  # as `timewarp simulate` runs it: see _simulator_arguments
        )
        return self.sim

    def run_linked(
        self,
        jobs: list[dict[str, Any]],
        profiles: dict[str, Any],
        message_log: TextIO,
        *,
        hosted: bool = False,
    ) -> Simulator:
        """:meth:`run` as `timewarp simulate` runs it: the simulator's runner in a thread
        against :meth:`Broker.run` over the broker's endpoint (``inproc://``: JSON over
        ZeroMQ; ``local://``: message objects), every message in ``message_log``;
        ``hosted`` (``local://`` only): the runner in the broker's own thread instead."""
        sim = self._make_sim(jobs, profiles, True)
        failed: list[BaseException] = []
        if hosted:
            local_link.connect(self.broker.endpoint).guest = lambda: run_runner(
                sim, self.broker.endpoint, message_log=message_log
            )
            result = self.broker.run()
            if not result.ok:
                raise RuntimeError(f"the hosted run failed: {result.reason}")
            return sim

        def drive() -> None:
            try:
                run_runner(sim, self.broker.endpoint, message_log=message_log,
                           context=zmq.Context.instance())  # fmt: skip
            except BaseException as exc:  # the test reads it
                failed.append(exc)
                self.broker.simulator_exited(repr(exc))

        thread = threading.Thread(target=drive, name="inprocess-sim", daemon=True)
        thread.start()
        result = self.broker.run()
        thread.join(60)
        if failed or not result.ok or thread.is_alive():
            raise RuntimeError(f"the linked run failed: {failed or result.reason}")
        return sim

    def run(
        self,
        jobs: list[dict[str, Any]],
        profiles: dict[str, Any],
        *,
        dynamic: bool = True,
        before: Callable[[p.Message], None] | None = None,
        max_messages: int = 100_000,
    ) -> Simulator:
        """Simulate the workload ``jobs``/``profiles`` to its end; ``before(message)`` sees
        each Batsim message before the broker does. Returns the finished simulator."""
        sim = self._make_sim(jobs, profiles, dynamic)
        message = sim.first_message()
        for _ in range(max_messages):
            decoded = p.decode(p.encode(message), "batsim")
            if before is not None:
                before(decoded)
            reply = p.decode(p.encode(self.broker.step(decoded)), "decision")
            self.replies.append(json.loads(p.encode(reply)))
            if sim.ended:
                return sim
            message = sim.handle_reply(reply)
        raise RuntimeError(f"the simulation did not end within {max_messages} messages")

    def sent(self, type_: str) -> list[tuple[float, dict[str, Any]]]:
        """(timestamp, data) of every event of ``type_`` the broker sent."""
        return [
            (e["timestamp"], e["data"]) for r in self.replies for e in r["events"]
            if e["type"] == type_
        ]  # fmt: skip

    def rows(self) -> list[dict[str, str]]:
        """``jobs.csv`` as it would be written, one dict per row."""
        assert self.sim is not None
        header, *lines = jobs_rows(self.sim.job_records())
        keys = header.split(",")
        return [dict(zip(keys, line.split(","), strict=False)) for line in lines]

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.store.list("events")[0] if e["reason"] == reason]

    def close(self) -> None:
        self.broker.close()
        self.facade.stop()
        self.clock.close()
