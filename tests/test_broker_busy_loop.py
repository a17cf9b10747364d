"""The stall guard sees the broker's own busy loop (issue 27, item 2's last clause): a
controller that never settles — it reconciles again and again at one virtual instant,
time never moving — is reported naming it, and the run ends with that report instead of
spinning silently. Injected through the controllers registry, as a new controller is
(``tests/toy_controller.py``)."""

from __future__ import annotations

import threading

from broker.clock.stall import ClockStall
from broker.controllers import registry
from broker.controllers.base import ControllerState, KeyedController
from broker.drivers.inprocess import InProcessRun

JOBS = [{"id": "1", "subtime": 0, "res": 1, "profile": "short"}]
PROFILES = {"short": {"type": "delay", "delay": 10, "cpu": "1", "scheduler": "default"}}
STALL_TIMEOUT_S = 0.2  # the loop is reported after 6 × this of wall time spent in it
WAIT_S = 120.0  # a bound on the whole run (the guard ends it after ~1.2 s of spinning)


class RestlessController(KeyedController[ControllerState]):
    """Bumps a ConfigMap on every round, from the first pod on: it never settles."""

    watches = ("pods",)
    state_type = ControllerState

    def _on_change(self, key: str, event: str, obj: dict) -> None:
        self.mark("default", "restless")

    def _sync(self, namespace: str, name: str) -> bool:
        current = self.store.get_or_none("configmaps", namespace, name)
        if current is None:
            body = {"metadata": {"name": name, "namespace": namespace}, "data": {"n": "0"}}
            self.store.create("configmaps", body, namespace=namespace)
        else:

            def bump(obj: dict) -> None:
                obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)

            self.store.update("configmaps", namespace, name, bump, copy=False)
        self.mark(namespace, name)  # and again, at this same instant
        return True


class SettlingController(RestlessController):
    """The same, but it stops after 50 bumps: a long chain at one instant, not a loop."""

    def _sync(self, namespace: str, name: str) -> bool:
        current = self.store.get_or_none("configmaps", namespace, name)
        if current is not None and int(current["data"]["n"]) >= 50:
            return False
        return super()._sync(namespace, name)


def _world(tmp_path, monkeypatch, name, cls):
    monkeypatch.setitem(registry.CONTROLLERS, name, cls)
    world = InProcessRun(tmp_path, nodes=1, cores=1)
    world.clock.stall.stall_timeout = STALL_TIMEOUT_S
    return world


def test_a_controller_that_never_settles_is_reported_and_ends_the_run(tmp_path, monkeypatch):
    world = _world(tmp_path, monkeypatch, "restless-controller", RestlessController)
    outcome: dict = {}

    def run() -> None:
        try:
            world.run(JOBS, PROFILES)
        except BaseException as exc:  # noqa: BLE001 — handed to the test's thread
            outcome["error"] = exc

    try:
        driver = threading.Thread(target=run, daemon=True)
        driver.start()
        driver.join(WAIT_S)
        assert not driver.is_alive(), "the broker still spins: the stall guard never saw it"
        assert isinstance(outcome.get("error"), ClockStall), outcome
        rounds = int(world.store.get("configmaps", "default", "restless")["data"]["n"])
    finally:
        world.close()
    report = str(outcome["error"])
    assert "the broker itself kept working at this instant" in report
    assert "restless-controller (" in report and "time never moving" in report
    assert "t=0.000000000 s" in report
    assert world.clock.stall.stall_reports == [report]
    assert world.clock.stall.nondeterministic_causes[-1].endswith("the broker's own loop")
    assert rounds > 10  # it did spin; the guard ended it


def test_a_long_chain_that_settles_is_not_a_stall(tmp_path, monkeypatch):
    world = _world(tmp_path, monkeypatch, "settling-controller", SettlingController)
    try:
        sim = world.run(JOBS, PROFILES)
        final = world.store.get("configmaps", "default", "restless")
    finally:
        world.close()
    assert sim.ended and final["data"]["n"] == "50"
    assert world.clock.stall.stall_reports == []
