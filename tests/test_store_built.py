"""The store's create of pods the broker built (``Store.create(built=True)``): admitted
once per shape (everything but the metadata), later pods of that shape take its admitted
parts and only their metadata is decoded and validated. Property: on generated workload
jobs and profiles (valid and not: bad names, labels, quantities, priority classes,
merged pod manifests of the wrong types), a run of creates through the built path stores
the same bytes under the same names, uids and resourceVersions, answers the same copies
and the same errors (status, message, causes), and sends watchers the same frames as the
same run through the client's path, PriorityClasses created in between included."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.cluster.cluster import _pod_for_job
from broker.facade import ManualClock, Store
from broker.facade.errors import ApiError
from broker.facade.kinds.pods import PodStrategy

MANIFESTS = [
    None,
    {"spec": {"restartPolicy": "Never"}},
    {"spec": {"restartPolicy": "Sometimes"}},
    {"spec": {"containers": [{"name": "Bad_Name"}]}},
    {"spec": {"containers": [{"ports": [{"containerPort": "x"}]}]}},
    {"spec": {"containers": [{"name": "main"}, {"name": "side", "image": "s"}]}},
    {"spec": {"containers": [{"name": "main"}, {"name": "side"}]}},
    {"spec": {"tolerations": "x"}},
    {"spec": {"nodeName": 5}},
    {"spec": {"schedulerName": None}},
    {"status": {"phase": "Running"}},
    {"status": {"phase": 3}},
    {"metadata": {"generateName": "g-"}},
    {"metadata": {"labels": {"from": "manifest"}}},
    {"metadata": {"labels": "x"}},
    {"metadata": {"finalizers": ["a/b"]}},
]
GOOD = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.sampled_from(["1", "500m", 2]),
        "labels": st.sampled_from([{}, {"app": "x"}]),
        "namespace": st.sampled_from(["default", "team-a"]),
        "priorityClassName": st.sampled_from(["system-node-critical", "high"]),
        "pod": st.sampled_from([None, {"spec": {"restartPolicy": "Never"}}]),
    },
)
ANY = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.sampled_from(["1", "500m", "0.5", "-1", "abc", 2, 0.25]),
        "memory": st.sampled_from(["1Gi", "0", "12x"]),
        "labels": st.sampled_from([{}, {"app": "x"}, {"bad key!": "v"}, {"k": "-bad-"}]),
        "annotations": st.sampled_from([{"a": "b"}, {"": "x"}]),
        "namespace": st.sampled_from(["default", "team-a", "Bad NS"]),
        "priorityClassName": st.sampled_from(["high", "system-node-critical", "Bad"]),
        "image": st.sampled_from(["busybox", "x:1", ""]),
        "scheduler": st.sampled_from(["default-scheduler", "other"]),
        "pod": st.sampled_from(MANIFESTS),
    },
)
FIELDS = GOOD | ANY
# a create: which job's fields, which profile, the pod's name; or a PriorityClass
# "high" (a few jobs and profiles, so that shapes repeat)
CREATES = st.lists(
    st.tuples(
        st.integers(0, 2), st.integers(0, 1), st.sampled_from(["p", "q", "Bad_Name"]), st.booleans()
    )
    | st.sampled_from(["priorityclass", "no-priorityclass"]),
    min_size=4,
    max_size=16,
)
JOBS = st.lists(FIELDS, min_size=3, max_size=3)
PROFILES = st.lists(FIELDS, min_size=2, max_size=2)


PRIORITY_CLASSES = "priorityclasses.scheduling.k8s.io"


def _answer(call: Any) -> Any:
    try:
        return call()
    except ApiError as exc:
        return ("ApiError", exc.code, exc.message, exc.details)
    except Exception as exc:  # noqa: BLE001 - a failure must be the same either way
        return (type(exc).__name__, str(exc))


def _run(jobs: list[dict], profiles: list[dict], creates: list, built: bool) -> dict[str, Any]:
    store = Store(ManualClock(), seed=3)
    watcher = store.watch("pods")
    answers = []
    for n, create in enumerate(creates):
        store.clock.advance(10**9)
        if create == "priorityclass":
            body = {"metadata": {"name": "high"}, "value": 1000 + n}
            answers.append(_answer(lambda b=body: store.create(PRIORITY_CLASSES, b)))
            continue
        if create == "no-priorityclass":
            answers.append(_answer(lambda: store.delete(PRIORITY_CLASSES, None, "high")))
            continue
        job, profile, name, last = create
        job = {**copy.deepcopy(jobs[job]), "id": f"w!{n}", "profile": "p"}
        name = f"{name}-{n % 5}"  # a name taken now and then (409)
        try:
            pod = _pod_for_job(f"w!{n}", name, job, copy.deepcopy(profiles[profile]))
        except Exception:  # noqa: BLE001 - not a pod the cluster would build
            continue
        if last:  # the metadata last among the keys: stored so, a shape of its own
            pod["metadata"] = pod.pop("metadata")
        ns = pod["metadata"]["namespace"]
        create = lambda p=pod, ns=ns: store.create("pods", p, namespace=ns, built=built)  # noqa: E731
        answers.append(_answer(create))
    entries = [e.json() for e in store._objects["pods"].values()]
    return {
        "answers": answers,
        "stored": entries,
        "rv": store.resource_version,
        "frames": watcher.drain(),
    }


@settings(max_examples=300, deadline=None)
@given(jobs=JOBS, profiles=PROFILES, creates=CREATES)
def test_built_creates_store_and_fail_as_the_client_path(jobs, profiles, creates):
    assert _run(jobs, profiles, creates, built=True) == _run(jobs, profiles, creates, built=False)


def test_a_shape_is_admitted_once_and_its_parts_shared(monkeypatch):
    calls = []
    prepare = PodStrategy.prepare_for_create

    def counted(self: Any, rt: Any, obj: Any, ctx: Any) -> None:
        calls.append(obj["metadata"]["name"])
        prepare(self, rt, obj, ctx)

    monkeypatch.setattr(PodStrategy, "prepare_for_create", counted)
    store = Store(ManualClock())
    for i in range(3):
        pod = _pod_for_job(f"w!{i}", f"p{i}", {"id": f"w!{i}"}, {"cpu": "1"})
        store.create("pods", pod, copy=False, built=True)
    assert calls == ["p0"]
    a, b = (store._objects["pods"][("default", n)].obj for n in ("p0", "p2"))
    assert a["spec"] is b["spec"] and a["metadata"] is not b["metadata"]
    # a PriorityClass written: the shape is admitted again
    store.create(PRIORITY_CLASSES, {"metadata": {"name": "x"}, "value": 1})
    store.create("pods", _pod_for_job("w!9", "p9", {"id": "w!9"}, {"cpu": "1"}), built=True)
    assert calls == ["p0", "p9"]


def test_shapes_that_do_not_repeat_are_looked_up_now_and_then_only():
    store = Store(ManualClock())
    for i in range(200):  # each pod its own requests: its own shape
        pod = _pod_for_job(f"w!{i}", f"p{i}", {"id": f"w!{i}", "cpu": f"{i + 1}m"}, {})
        store.create("pods", pod, copy=False, built=True)
    remembered = len(store._shapes)
    assert remembered < 20  # the first ones, then one in SHAPE_PROBE
    for i in range(200, 400):  # one shape again: found at a probe, then every time
        store.create("pods", _pod_for_job(f"w!{i}", f"p{i}", {"id": f"w!{i}"}, {}), built=True)
    assert store._shape_rate > 0.9 and len(store._shapes) <= remembered + 1
