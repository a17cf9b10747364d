"""Stored objects as the controllers may read them: the ``status`` fields they use decoded
as kube-controller-manager's typed objects would be, a field that does not decode into
its Go type read as absent (zero).

kube-controller-manager never sees ``status.conditions: "x"``: its informers decode into
Go structs. The facade stores JSON, and a status write (``…/status``, a merge patch, the
broker's own store calls in tests) may leave a field of the wrong type; a controller that
trusts it dies with the driver thread. :func:`typed` is the decode: a well-formed object
comes back as it is (the same object, nothing copied), a malformed one as a copy with
the malformed fields dropped (a condition keeps ``type`` and ``status``, ``""`` when not
strings, as Go's zero values). :class:`TypedStore` applies it to everything a controller
reads from the store, and to the objects of its own kinds it rewrites.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from broker.facade.store import Store
from broker.k8s import podutil

Obj = dict[str, Any]


@dataclass(frozen=True)
class _StatusSchema:
    ints: tuple[str, ...] = ()
    strings: tuple[str, ...] = ()
    times: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()
    container_statuses: bool = False
    # times the controllers parse must parse; a pod's (the kubelet's, or a scheduler's
    # PodScheduled) need only be strings: podutil reads an unparseable one as unknown
    strict_times: bool = True


_CONDITION_STRINGS = ("reason", "message")
_CONDITION_TIMES = ("lastTransitionTime", "lastUpdateTime", "lastProbeTime")
SCHEMAS: dict[str, _StatusSchema] = {
    "deployments.apps": _StatusSchema(
        ints=(
            "observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
            "availableReplicas", "unavailableReplicas", "terminatingReplicas", "collisionCount",
        ),
    ),
    "replicasets.apps": _StatusSchema(
        ints=(
            "replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas",
            "terminatingReplicas", "observedGeneration",
        ),
    ),
    "jobs.batch": _StatusSchema(
        ints=("active", "succeeded", "failed", "ready", "terminating"),
        strings=("completedIndexes", "failedIndexes"),
        times=("startTime", "completionTime"),
        objects=("uncountedTerminatedPods",),
    ),
    "pods": _StatusSchema(
        strings=("phase", "reason", "message", "hostIP", "podIP"),
        times=("startTime",),
        container_statuses=True,
        strict_times=False,
    ),
}  # fmt: skip


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_time(value: Any, strict: bool = True) -> bool:
    """A ``metav1.Time`` as the controllers parse it (None: Go's zero time, null); with
    ``strict=False`` any string."""
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    if not strict:
        return True
    try:
        podutil.parse_time(value)
    except ValueError:
        return False
    return True


def _condition(value: Any, strict: bool = True) -> Obj | None:
    """One condition decoded (None: not an object, dropped)."""
    if not isinstance(value, dict):
        return None
    bad = [k for k in _CONDITION_STRINGS if k in value and not isinstance(value[k], str)]
    bad += [k for k in _CONDITION_TIMES if k in value and not _is_time(value[k], strict)]
    required = [k for k in ("type", "status") if not isinstance(value.get(k), str)]
    if not bad and not required:
        return value
    fixed = {k: v for k, v in value.items() if k not in bad}
    for k in required:
        fixed[k] = ""
    return fixed


def _list_of(value: Any, decode: Callable[[Any], Obj | None]) -> list[Obj] | None:
    """A list whose entries decode (the same list when all are well-formed); None: not
    a list."""
    if not isinstance(value, list):
        return None
    decoded = [decode(v) for v in value]
    if all(d is v for d, v in zip(decoded, value, strict=True)):
        return value
    return [d for d in decoded if d is not None]


def _container_status(value: Any) -> Obj | None:
    """One container status decoded: ``restartCount`` an int, ``state``/``lastState``
    objects of objects (``running``, ``waiting``, ``terminated``)."""
    if not isinstance(value, dict):
        return None
    drop = [k for k in ("restartCount",) if k in value and not _is_int(value[k])]
    states: Obj = {}
    for key in ("state", "lastState"):
        state = value.get(key)
        if state is None:
            continue
        if not isinstance(state, dict):
            drop.append(key)
        elif not all(isinstance(v, dict) for v in state.values()):
            states[key] = {k: v for k, v in state.items() if isinstance(v, dict)}
    if not drop and not states:
        return value
    return {**{k: v for k, v in value.items() if k not in drop}, **states}


_MISSING = object()


def _well_formed(schema: _StatusSchema, status: Obj) -> bool:
    """Whether ``status`` decodes as it is — the common case, checked in one pass with
    no copy, closure nor list built (a running pod's status: ~17 -> ~3 µs). It may say
    False for a status that decodes as it is (a subclass of str, say): :func:`_decode`
    then finds nothing to drop. It never says True for one that does not (a property
    in tests/test_controllers_typed.py holds it to :func:`_decode`)."""
    get = status.get
    for key in schema.ints:
        value = get(key, _MISSING)
        if value is not _MISSING and type(value) is not int:
            return False
    for key in schema.strings:
        value = get(key, _MISSING)
        if value is not _MISSING and type(value) is not str:
            return False
    strict = schema.strict_times
    for key in schema.times:
        value = get(key)
        if value is not None and (type(value) is not str or (strict and not _is_time(value))):
            return False
    for key in schema.objects:
        value = get(key)
        if value is not None and type(value) is not dict:
            return False
    conditions = get("conditions")
    if conditions is not None:
        if type(conditions) is not list:
            return False
        for cond in conditions:
            if type(cond) is not dict:
                return False
            cget = cond.get
            if type(cget("type")) is not str or type(cget("status")) is not str:
                return False
            for key in _CONDITION_STRINGS:
                value = cget(key, _MISSING)
                if value is not _MISSING and type(value) is not str:
                    return False
            for key in _CONDITION_TIMES:
                value = cget(key)
                if value is not None and (
                    type(value) is not str or (strict and not _is_time(value))
                ):
                    return False
    if schema.container_statuses:
        for key in ("containerStatuses", "initContainerStatuses"):
            statuses = get(key)
            if statuses is not None and not _container_statuses_well_formed(statuses):
                return False
    return True


def _container_statuses_well_formed(statuses: Any) -> bool:
    """:func:`_well_formed` for a list of container statuses."""
    if type(statuses) is not list:
        return False
    for cs in statuses:
        if type(cs) is not dict:
            return False
        restarts = cs.get("restartCount", _MISSING)
        if restarts is not _MISSING and type(restarts) is not int:
            return False
        for key in ("state", "lastState"):
            state = cs.get(key)
            if state is None:
                continue
            if type(state) is not dict:
                return False
            for value in state.values():
                if type(value) is not dict:
                    return False
    return True


def _status(schema: _StatusSchema, status: Obj) -> Obj:
    """``status`` with what does not decode dropped (the same dict if nothing)."""
    return status if _well_formed(schema, status) else _decode(schema, status)


def _decode(schema: _StatusSchema, status: Obj) -> Obj:
    """:func:`_status` field by field: a copy with what does not decode dropped, or
    ``status`` itself when nothing needed to be."""
    fixed: Obj | None = None

    def put(key: str, value: Any) -> None:
        nonlocal fixed
        if fixed is None:
            fixed = dict(status)
        if value is None:
            fixed.pop(key, None)
        else:
            fixed[key] = value

    for key in schema.ints:
        if key in status and not _is_int(status[key]):
            put(key, None)
    for key in schema.strings:
        if key in status and not isinstance(status[key], str):
            put(key, None)
    for key in schema.times:
        if key in status and not _is_time(status[key], schema.strict_times):
            put(key, None)
    for key in schema.objects:
        if key in status and not isinstance(status[key], dict | None):
            put(key, None)
    strict = schema.strict_times
    lists: list[tuple[str, Callable[[Any], Obj | None]]] = [
        ("conditions", lambda v: _condition(v, strict))
    ]
    if schema.container_statuses:
        lists += [("containerStatuses", _container_status), ("initContainerStatuses", _container_status)]  # fmt: skip
    for key, decode in lists:
        if key in status and status[key] is not None:
            decoded = _list_of(status[key], decode)
            if decoded is not status[key]:
                put(key, decoded)
    return status if fixed is None else fixed


def typed(key: str, obj: Obj) -> Obj:
    """``obj`` (of resource ``key``) as a controller may read it: the same object when its
    status decodes, else a shallow copy with a decoded status (no status at all when it
    is not an object). Kinds without a schema come back as they are."""
    schema = SCHEMAS.get(key)
    if schema is None or "status" not in obj:
        return obj
    status = obj["status"]
    if status is None:
        return obj
    if not isinstance(status, dict):
        return {k: v for k, v in obj.items() if k != "status"}
    decoded = _status(schema, status)
    return obj if decoded is status else {**obj, "status": decoded}


def decode_in_place(key: str, obj: Obj) -> None:
    """:func:`typed` on an object the caller owns (a copy being rewritten)."""
    fixed = typed(key, obj)
    if fixed is not obj:
        obj.clear()
        obj.update(fixed)


class TypedStore:
    """The store as a controller sees it: every object read goes through :func:`typed`;
    an object of the controller's own kinds (``owns``) that it rewrites is decoded
    first, so the write leaves no malformed field behind (a pod's status, which the
    kubelet owns, is never rewritten from its decode). Everything else is the store's."""

    def __init__(self, store: Store, owns: tuple[str, ...] = ()) -> None:
        self.raw = store
        self.owns = owns

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)

    def get(self, key: str, namespace: str | None, name: str) -> Obj:
        return typed(key, self.raw.get(key, namespace, name))

    def get_or_none(self, key: str, namespace: str | None, name: str) -> Obj | None:
        obj = self.raw.get_or_none(key, namespace, name)
        return None if obj is None else typed(key, obj)

    def list(self, key: str, *args: Any, **kwargs: Any) -> tuple[list[Obj], Any]:
        items, rest = self.raw.list(key, *args, **kwargs)
        return [typed(key, obj) for obj in items], rest

    def update(
        self, key: str, namespace: str | None, name: str, mutate: Callable[[Obj], Any], **kw: Any
    ) -> Obj | None:
        return self._update(self.raw.update, key, namespace, name, mutate, kw)

    def update_status(
        self, key: str, namespace: str | None, name: str, mutate: Callable[[Obj], Any], **kw: Any
    ) -> Obj | None:
        """:meth:`Store.update_status` (``mutate`` edits status and metadata only), as
        :meth:`update` decodes."""
        return self._update(self.raw.update_status, key, namespace, name, mutate, kw)

    def _update(
        self,
        write: Callable[..., Obj | None],
        key: str,
        namespace: str | None,
        name: str,
        mutate: Callable[[Obj], Any],
        kw: dict[str, Any],
    ) -> Obj | None:
        if key in self.owns:

            def decoded_then(obj: Obj) -> Any:
                decode_in_place(key, obj)
                return mutate(obj)

            after = write(key, namespace, name, decoded_then, **kw)
        else:
            after = write(key, namespace, name, mutate, **kw)
        return None if after is None else typed(key, after)

    def replace(self, key: str, obj: Obj, **kw: Any) -> Obj:
        return typed(key, self.raw.replace(key, obj, **kw))

    def add_listener(
        self, fn: Callable[[str, str, Obj], None], kinds: Iterable[str] | None = None
    ) -> None:
        self.raw.add_listener(
            lambda key, event, obj: fn(key, event, _typed_commit(key, obj)), kinds
        )


# the latest committed object and its decode: the store calls its listeners one after the
# other with the same object (stored objects are never mutated), so the controllers'
# listeners share one decode per commit instead of one each (~8 µs for a running pod)
_last_commit: tuple[str, Obj, Obj] | None = None


def _typed_commit(key: str, obj: Obj) -> Obj:
    global _last_commit
    last = _last_commit  # one read: another thread may replace it meanwhile
    if last is not None and last[1] is obj and last[0] == key:
        return last[2]
    decoded = typed(key, obj)
    _last_commit = (key, obj, decoded)
    return decoded
