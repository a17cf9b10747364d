"""Store listeners filtered by kind: a commit calls only the listeners of its kind (and
not those that skip it), in the order they were added, whatever kinds the others want."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.controllers.registry import CONTROLLERS
from broker.facade import ManualClock
from broker.facade.store import Store

_KINDS = ("configmaps", "serviceaccounts", "pods")


def _obj(kind: str, name: str) -> dict:
    if kind == "pods":
        return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    return {"metadata": {"name": name}, "data": {"k": "v"}}


def test_a_listener_for_another_kind_is_not_called():
    store = Store(ManualClock())
    heard: list[tuple[str, str]] = []
    store.add_listener(lambda key, type_, obj: heard.append(("cm", key)), ("configmaps",))
    store.add_listener(lambda key, type_, obj: heard.append(("not-cm", key)), skip=("configmaps",))
    store.create("configmaps", _obj("configmaps", "a"))
    store.create("serviceaccounts", _obj("serviceaccounts", "s"))
    assert heard == [("cm", "configmaps"), ("not-cm", "serviceaccounts")]


def test_a_listener_added_later_is_heard_for_kinds_already_committed():
    store = Store(ManualClock())
    store.create("configmaps", _obj("configmaps", "a"))  # the dispatch for the kind is cached
    heard: list[str] = []
    store.add_listener(
        lambda key, type_, obj: heard.append(obj["metadata"]["name"]), ["configmaps"]
    )
    store.create("configmaps", _obj("configmaps", "b"))
    assert heard == ["b"]


@settings(max_examples=60, deadline=None)
@given(
    wants=st.lists(
        st.tuples(st.none() | st.sets(st.sampled_from(_KINDS)), st.sets(st.sampled_from(_KINDS))),
        min_size=1,
        max_size=6,
    ),
    commits=st.lists(st.sampled_from(_KINDS), min_size=1, max_size=8),
)
def test_the_listeners_a_commit_calls_and_their_order(wants, commits):
    """Against the unfiltered definition: every listener, in order, each deciding itself."""
    store = Store(ManualClock())
    heard: list[tuple[int, str, str]] = []
    for i, (kinds, skip) in enumerate(wants):
        store.add_listener(
            lambda key, type_, obj, i=i: heard.append((i, key, obj["metadata"]["name"])),
            kinds,
            skip=skip,
        )
    expected = []
    for n, kind in enumerate(commits):
        name = f"o{n}"
        store.create(kind, _obj(kind, name))
        for i, (kinds, skip) in enumerate(wants):
            if (kinds is None or kind in kinds) and kind not in skip:
                expected.append((i, kind, name))
    assert heard == expected


def test_the_controllers_listen_to_every_kind_their_on_change_reads():
    """A controller's ``listens`` names every kind its ``_on_change`` acts on: with each
    kind committed, the listener filtered by ``listens`` and one unfiltered see the same
    calls that change something (the unfiltered one's extra calls are for other kinds)."""
    import inspect

    for name, cls in CONTROLLERS.items():
        source = inspect.getsource(cls._on_change)
        assert cls.listens is not None, name
        for key in ("pods", "nodes", "jobs.batch", "deployments.apps", "replicasets.apps"):
            literal = (
                f'"{key}"' in source
                or (key == "deployments.apps" and "DEPLOY_KEY" in source)
                or (key == "replicasets.apps" and "RS_KEY" in source)
            )
            if literal:
                assert key in cls.listens, (name, key)
