"""A toy controller for tests/test_controller_registry.py: written as a new controller
would be (one file, then one line in ``broker/controllers/registry.py``).

It keeps, in every namespace that has pods, a ConfigMap ``pod-census`` whose ``data``
counts the namespace's pods by phase (``{"Running": "2", "Succeeded": "1"}``).
"""

from __future__ import annotations

from typing import Any

from broker.controllers.base import ControllerState, KeyedController

CENSUS = "pod-census"
LABEL = "toy.timewarp.io/census"


class PodCensusController(KeyedController[ControllerState]):
    watches = ("pods",)
    state_type = ControllerState

    def _on_change(self, key: str, event: str, obj: dict[str, Any]) -> None:
        if key == "pods":  # store lock held: only mark the namespace's census
            self.mark(obj["metadata"].get("namespace", ""), CENSUS)

    def _sync(self, namespace: str, name: str) -> bool:
        counts: dict[str, int] = {}
        for pod in self.store.list("pods", namespace)[0]:
            phase = (pod.get("status") or {}).get("phase", "Pending")
            counts[phase] = counts.get(phase, 0) + 1
        data = {phase: str(n) for phase, n in sorted(counts.items())}
        current = self.store.get_or_none("configmaps", namespace, name)
        if current is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "labels": {LABEL: "true"}},
                "data": data,
            }
            self.store.create("configmaps", body, namespace=namespace)
            return True
        if current.get("data") == data:
            return False

        def write(obj: dict[str, Any]) -> None:
            obj["data"] = data

        self.store.update("configmaps", namespace, name, write, copy=False)
        return True
