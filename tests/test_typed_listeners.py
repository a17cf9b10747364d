"""Controllers' store listeners share one decode per commit (broker/controllers/typed.py
``TypedStore.add_listener``): each sees what :func:`typed` makes of the committed object,
decoded once however many listen, and the next commit's object is decoded afresh."""

from __future__ import annotations

from broker.controllers import typed as typed_module
from broker.controllers.typed import TypedStore, typed
from broker.facade import ManualClock, Store


def _pod(name: str, phase: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": phase},
    }


def test_listeners_share_one_decode_per_commit(monkeypatch):
    store = Store(ManualClock())
    calls = []

    def counting(key, obj):
        calls.append(key)
        return typed(key, obj)

    monkeypatch.setattr(typed_module, "typed", counting)
    seen: list[list] = [[], [], []]
    for i in range(3):
        TypedStore(store).add_listener(lambda key, event, obj, i=i: seen[i].append(obj))
    store.create("pods", _pod("a", "Pending"))
    # a malformed phase (a status write may leave one): dropped by the decode
    store.update("pods", "default", "a", lambda obj: obj["status"].update(phase=7), copy=False)
    assert calls == ["pods", "pods"]  # once per commit, not once per listener
    for objs in seen:
        assert [o["metadata"]["name"] for o in objs] == ["a", "a"]
        assert objs[0]["status"]["phase"] == "Pending"
        assert "phase" not in objs[1]["status"]  # each sees the decode of its own commit
    assert seen[0][1] is seen[1][1] is seen[2][1]
