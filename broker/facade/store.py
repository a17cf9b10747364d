"""The object store: every API object, its resourceVersion, and the watch history.

Invariants:
- One global resourceVersion counter (like etcd's revision): each committed write takes
  the next integer; an object's ``metadata.resourceVersion`` is the revision of its last
  write; a list's is the revision when it was taken.
- Stored objects are never mutated: a write stores a new dict. Readers inside the facade
  may hold references without copying; the public read methods return deep copies.
- Every commit is offered to the watchers of its type under the store lock, so each
  watcher sees events in strictly increasing resourceVersion order with no gaps (for
  the objects it selects) and the bookkeeping of queued frames happens before the
  writing call returns.
- Per type, the last ``history_limit`` events are kept, and no more than
  ``history_bytes`` of them (their encoded objects); a watch may resume from any
  resourceVersion >= the newest compacted one, older ones get 410 Gone. An API write
  stores at most ``MAX_OBJECT_BYTES`` (413 beyond). Memory is bounded by live objects +
  history, whatever the number and the size of the writes.
- API writes (create, replace, patch) are admitted as the API server admits them
  (the type's strategy, ``rt.strategy`` (``kinds/``): decode, default, validate: 400
  and 422 with its messages). Nothing here tests which kind it holds.
- A commit reaches every watcher and every listener of its kind, whatever one of them raises.
"""

from __future__ import annotations

import bisect
import json
import logging
import random
import sys
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from typing import Any

from . import crds, errors, listoptions, objects
from . import validation as v
from .clock import Clock
from .expiry import Expiry
from .kinds import Context
from .patch import apply_patch
from .resources import GLOBAL, Registry, ResourceType, resource_type
from .selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector
from .watch import WATCH_QUEUE_BYTES, StoredEvent, Watcher, bookmark_object, event_frame

Obj = dict[str, Any]
Listener = Callable[[str, str, Obj], None]
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# The largest object an API write may store (the API server's request limit, 3 MiB:
# etcd's own limit is below it), and the most bytes of watch history kept per type.
MAX_OBJECT_BYTES = 3 * 1024 * 1024
HISTORY_BYTES = 64 * 1024 * 1024
# Store.create(built=True): the admitted shapes kept, and the kinds whose writes change
# what a create's admission reads of the store (kinds.Context: PriorityClasses, CRDs)
SHAPES_KEPT = 64
# below this share of shapes found (a moving average), the shapes of a workload rarely
# repeat (each job its own requests): a miss costs the shape's encoding, so only every
# SHAPE_PROBE-th built create looks, until they repeat again
SHAPE_RATE_FLOOR = 0.25
SHAPE_PROBE = 32
_CONTEXT_KINDS = frozenset(("priorityclasses.scheduling.k8s.io", crds.CRD_KEY))
_log = logging.getLogger(__name__)


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# json.dumps(obj, separators=(",", ":"), ensure_ascii=False), made once: dumps builds a
# JSONEncoder and its C encoder at every call, a third of the cost of a pod's encoding.
# No circular check (markers None): what the store holds is a tree.
_encode = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, True
) if json.encoder.c_make_encoder is not None else None  # type: ignore[attr-defined]  # fmt: skip


def _dumps(obj: Any) -> bytes:
    if _encode is not None and isinstance(obj, (dict, list)):
        text = "".join(_encode(obj, 0))
    else:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate (from a "\ud800" escape): keep it escaped
        return json.dumps(obj, separators=(",", ":")).encode()


def same_json(a: Any, b: Any) -> bool:
    """``a == b`` as JSON values: Python's ``==`` counts ``True == 1 == 1.0``, which
    encode differently, so an edit or a client's write changing only a value's type
    would be taken for no change (the stored object kept, the write silently dropped).
    Callers test ``==`` first: this walk only confirms what C found equal."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        if a.keys() != b.keys():
            return False
        # a leaf is compared here, without a call each (most of an object's values are)
        for k, v in a.items():
            w = b[k]
            kind = type(v)
            if kind is not type(w):
                return False
            if kind is dict or kind is list:
                if not same_json(v, w):
                    return False
            elif not v == w:
                return False
        return True
    if kind is list:
        if len(a) != len(b):
            return False
        for v, w in zip(a, b, strict=True):
            kind = type(v)
            if kind is not type(w):
                return False
            if kind is dict or kind is list:
                if not same_json(v, w):
                    return False
            elif not v == w:
                return False
        return True
    return a == b


def _sharing(fresh: Callable[[Any], Any]) -> tuple[Callable[[Any, Any], Any], ...]:
    """The sharing functions (``_share``, ``_share_items``, ``_stored_edit``) with
    ``fresh`` for what the edit made new: :func:`canonical` (a copy of JSON values,
    checked) for an edit of unknown origin, the value itself for a trusted one."""

    def share(new: Any, old: Any) -> Any:
        if new is old:  # a stored part the edit left in place (Store.update_status): no walk
            return old
        if type(new) is dict and type(old) is dict:
            return old if new == old and same_json(new, old) else share_items(new, old)
        if type(new) is list and type(old) is list and len(new) == len(old):
            if new == old and same_json(new, old):
                return old
            return [share(a, b) for a, b in zip(new, old, strict=True)]
        if type(new) is str and type(old) is str and new == old:
            return old  # an unchanged string: the stored one (canonical already)
        return fresh(new)

    def share_items(new: Obj, old: Obj) -> Obj:
        return {
            k: share(v, old[k]) if k in old else fresh(v) if type(k) is str else _bad_key(k)
            for k, v in new.items()
        }

    def stored_edit(new: Obj, old: Obj) -> Obj:
        meta = share_items(new["metadata"], old["metadata"])
        # metadata shared once (and as its own dict), in its place among the keys
        return {
            k: meta
            if k == "metadata"
            else share(v, old[k])
            if k in old
            else fresh(v)
            if type(k) is str
            else _bad_key(k)
            for k, v in new.items()
        }

    return share, share_items, stored_edit


def _bad_key(key: Any) -> Any:
    raise TypeError(f"non-string key {key!r}")


def _as_is(value: Any) -> Any:
    return value


def _clone(value: Any) -> Any:
    """A mutable copy of a stored object that shares its strings (interned by
    :func:`canonical` when it was stored): what a broker-side write edits. Quicker than
    decoding its encoding and canonicalising the result again."""
    # leaves are taken as they are without a call each (most of a pod's values are)
    if type(value) is dict:
        return {k: _clone(v) if type(v) in _NESTED else v for k, v in value.items()}
    if type(value) is list:
        return [_clone(v) if type(v) in _NESTED else v for v in value]
    return value


_NESTED = (dict, list)
# what Store.update_status copies for its mutate to edit; the rest is shared as stored
_OWN_PARTS = frozenset(("metadata", "status"))


def _thaw(obj: Obj) -> Obj:
    """A private, mutable copy of a JSON object: decoding its encoding is several times
    quicker than ``copy.deepcopy``."""
    return json.loads(_dumps(obj))


_intern = sys.intern


class _NotJson(Exception):
    pass


def _canonical_fast(value: Any) -> Any:
    if isinstance(value, str):
        return _intern(value) if len(value) <= 64 else value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise _NotJson
            out[_intern(k)] = _canonical_fast(v)
        return out
    if isinstance(value, (list, tuple)):
        return [_canonical_fast(v) for v in value]
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float) and value == value and value not in (_INF, -_INF):
        return value
    raise _NotJson


_INF = float("inf")


def canonical(value: Any, where: str = "") -> Any:
    """A deep copy made of JSON types only (tuples become lists), with short strings
    interned: 100k pods share one "default-scheduler" instead of holding 100k copies.
    TypeError names the first non-JSON value."""
    try:
        return _canonical_fast(value)
    except _NotJson:
        pass
    _check_json(value, where)  # raises, naming where
    raise AssertionError("unreachable")


# ``_share(new, old)``: ``new`` (a broker-edited :func:`_clone` of the stored ``old``) as it
# is stored: each part equal to ``old``'s is ``old``'s own (stored objects are never
# changed, so versions may share them), every other part canonical (a private copy of
# JSON values, strings interned). Equal as :meth:`Store.update` counts it
# (:func:`same_json`). ``_share_items(new, old)``: a new dict of ``new``'s items, each
# shared with ``old``'s of that key (a key ``old`` lacks is checked: JSON keys are
# strings). ``_stored_edit(new, old)``: ``_share`` for a whole object, its top level and
# its metadata its own (the commit writes ``metadata.resourceVersion`` in place).
_share, _share_items, _stored_edit = _sharing(canonical)
# The same for a *trusted* edit (``Store.update_status(trusted=True)``, the binding): what
# the edit made new is the broker's own, built of JSON types (str keys; lists, not
# tuples; finite numbers) and handed over, referenced by nothing the broker changes
# later: stored as it is. A canonical copy of it would encode to the same bytes (the
# copy's only effects are checking, copying and interning), and was ~18 walks per pod.
_trusted_share, _trusted_share_items, _trusted_stored_edit = _sharing(_as_is)


def _check_json(value: Any, where: str) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"non-string key {k!r} at {where or '/'}")
            _check_json(v, f"{where}/{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_json(v, f"{where}/{i}")
    elif isinstance(value, float):
        if value != value or value in (_INF, -_INF):
            raise TypeError(f"non-finite number at {where or '/'}")
    elif not (value is None or isinstance(value, (str, bool, int))):
        raise TypeError(f"{type(value).__name__} is not a JSON value (at {where or '/'})")


IMMUTABLE = "field is immutable"


def _keep_deletion(rt: ResourceType, meta: Obj, old_meta: Obj) -> None:
    """An update never moves or clears ``deletionTimestamp`` nor clears the grace period
    (``rest.BeforeUpdate`` puts the stored ones back); it may not set them on an object
    that has none, nor change the grace period (422 "field is immutable"), nor add a
    finalizer to an object being deleted (422), as ``ValidateObjectMetaUpdate`` says."""
    errs = []  # in ValidateObjectMetaUpdate's order
    if old_meta.get("deletionTimestamp"):
        old = old_meta.get("finalizers") or []
        added = [f for f in meta.get("finalizers") or [] if f not in old]
        if added:
            listed = ", ".join(f'"{f}"' for f in added)
            errs.append(
                v.forbidden(
                    "metadata.finalizers",
                    f"no new finalizers can be added if the object is being deleted, found new finalizers []string{{{listed}}}",
                )
            )
    stamp = meta.get("deletionTimestamp")
    if "deletionTimestamp" in old_meta:
        meta["deletionTimestamp"] = old_meta["deletionTimestamp"]
    elif stamp is not None:
        errs.append(v.invalid_value("metadata.deletionTimestamp", v.go_time(stamp), IMMUTABLE))
    grace = meta.get("deletionGracePeriodSeconds")
    if grace is None and "deletionGracePeriodSeconds" in old_meta:
        meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
    elif grace is not None and grace != old_meta.get("deletionGracePeriodSeconds"):
        errs.append(v.invalid_value("metadata.deletionGracePeriodSeconds", grace, IMMUTABLE))
    if errs:
        raise v.invalid(rt.kind, meta.get("name") or "", errs, rt.group)


def _check_resource_version(rt: ResourceType, name: str, current: Obj, wanted: Any) -> None:
    """Optimistic concurrency: a write naming a resourceVersion other than the stored
    one is a 409 Conflict."""
    if wanted not in (None, "") and wanted != current["metadata"]["resourceVersion"]:
        raise errors.conflict(
            rt.plural,
            name,
            "the object has been modified; please apply your changes to the latest "
            "version and try again",
            rt.group,
        )


class _Entry:
    """A stored object and its encoding, computed at most once."""

    __slots__ = ("obj", "_json")

    def __init__(self, obj: Obj) -> None:
        self.obj = obj
        self._json: bytes | None = None

    def json(self) -> bytes:
        if self._json is None:
            self._json = _dumps(self.obj)
        return self._json

    def thaw(self) -> Obj:
        """A private, mutable copy (stored objects are never changed in place)."""
        return json.loads(self.json())


class _Packed:
    """A stored object held as its encoding only, decoded on each access: for kinds the
    broker writes many of and rarely reads back (Events, ~190k live ones at 10k nodes
    under the 1 h TTL), where the decoded dict costs ~6x its bytes. Each ``obj`` is a
    fresh dict; stored objects are never changed in place, so no reader can tell."""

    __slots__ = ("_json",)

    def __init__(self, obj: Obj) -> None:
        self._json = _dumps(obj)

    @property
    def obj(self) -> Obj:
        return json.loads(self._json)

    def json(self) -> bytes:
        return self._json

    def thaw(self) -> Obj:
        return json.loads(self._json)


_Held = _Entry | _Packed


def _key_of(obj: Obj) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


def _labels(selector: str | LabelSelector | None) -> LabelSelector:
    return selector if isinstance(selector, LabelSelector) else parse_label_selector(selector)


def _fields(selector: str | FieldSelector | None, rt: ResourceType) -> FieldSelector:
    if isinstance(selector, FieldSelector):
        return selector
    return parse_field_selector(selector, rt.key, rt.strategy.fields)


def _default_and_validate(rt: ResourceType, obj: Obj, ctx: Context) -> None:
    """What a create does after decoding: the kind's defaults, then its validation."""
    rt.strategy.prepare_for_create(rt, obj, ctx)
    rt.strategy.validate(rt, obj)


class _BuiltinOnly:
    """An admission context with nothing stored: the built-in PriorityClasses only."""

    def priorities(self) -> dict[str, int]:
        return dict(objects.BUILTIN_PRIORITY_CLASSES)

    def serves(self, group: str, version: str, plural: str) -> bool:
        return GLOBAL.lookup(group, version, plural) is not None


def admissible(key: str, obj: Obj) -> Obj:
    """``obj`` as a create would store it — decoded as the Go types would be, defaulted
    and validated — or the :class:`~broker.facade.errors.ApiError` (400, 422) the create
    would get. Nothing is stored: inputs are checked with it before a run, so they meet
    exactly the rules the API applies (``broker/cluster/input_check.py``)."""
    rt = resource_type(key)
    obj = Store._new_object(rt, obj)
    if rt.namespaced:
        obj["metadata"].setdefault("namespace", "default")
    _default_and_validate(rt, obj, _BuiltinOnly())
    return obj


class Store:
    """Thread-safe, in-memory API objects keyed by resource (``"pods"``,
    ``"leases.coordination.k8s.io"``), namespace and name. Methods raise ``ApiError``
    with the status a real API server would return."""

    def __init__(
        self,
        clock: Clock,
        *,
        history_limit: int = 1000,
        history_bytes: int = HISTORY_BYTES,
        seed: int = 0,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
    ) -> None:
        if history_limit < 1:
            raise ValueError("history_limit must be >= 1")
        self.clock = clock
        self.history_limit = history_limit
        self.history_bytes = history_bytes
        self.watch_queue_bytes = WATCH_QUEUE_BYTES
        self.dropped_watchers = 0  # watchers dropped for holding too much unsent
        self._lock = threading.RLock()
        self._rng = random.Random(seed)
        # uids of what the broker writes beside the run (its Events): a stream of their
        # own, so that they change no other object's uid or generated name
        self._aside_rng = random.Random(f"aside-{seed}")
        self._expiry = Expiry()  # Events' time to live (Strategy.ttl_s)
        # (key, shape) -> admitted parts of a broker-built object (create(built=True)),
        # forgotten when what admission reads of the store changes (_CONTEXT_KINDS)
        self._shapes: dict[tuple[str, bytes], Obj] = {}
        self._shape_rate, self._built = 1.0, 0  # share of shapes found; built creates
        self._rv = 0
        # per stored type (its key), made when first used: a type registered at run time
        # (resources.register) is stored as the built-in ones
        self._objects: dict[str, dict[tuple[str, str], _Held]] = defaultdict(dict)
        self._history: dict[str, deque[StoredEvent]] = defaultdict(deque)
        self._history_sizes: dict[str, deque[int]] = defaultdict(deque)
        self._history_total: dict[str, int] = defaultdict(int)
        self._compacted: dict[str, int] = defaultdict(int)
        # dicts as ordered sets: events fan out to watchers in the order they started.
        self._watchers: dict[str, dict[Watcher, None]] = defaultdict(dict)
        self._sorted: dict[str, list[tuple[str, str]] | None] = defaultdict(lambda: None)
        # registration order, with the kinds each wants (None: every kind) and the kinds
        # it skips; a commit calls only its kind's listeners, in that order (_dispatch
        # caches the list per kind, rebuilt when a listener is added)
        self._listeners: list[tuple[Listener, frozenset[str] | None, frozenset[str]]] = []
        self._dispatch: dict[str, tuple[Listener, ...]] = {}
        # the types this store serves: the process's, and the custom resources of its
        # own CustomResourceDefinitions (crds.py), seen by no other store
        self.types = Registry(GLOBAL)
        self.add_listener(crds.Definitions(self).on_commit, (crds.CRD_KEY,))
        for ns in namespaces:
            self.create("namespaces", {"metadata": {"name": ns}})

    # --- time ----------------------------------------------------------------------

    def now_epoch_ns(self) -> int:
        return self.clock.wall_epoch_ns() + self.clock.now_ns()

    def timestamp(self) -> str:
        """Now (virtual) as ``metav1.Time``."""
        return objects.format_time(self.now_epoch_ns())

    def micro_timestamp(self) -> str:
        return objects.format_micro_time(self.now_epoch_ns())

    # --- reads ---------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._rv

    def get(self, key: str, namespace: str | None, name: str) -> Obj:
        """A deep copy of the object; ApiError(404) when absent."""
        with self._lock:
            return self._entry(key, namespace, name).thaw()

    def get_or_none(self, key: str, namespace: str | None, name: str) -> Obj | None:
        with self._lock:
            entry = self._objects[self.types.resource_type(key).key].get((namespace or "", name))
            return None if entry is None else entry.thaw()

    def list(
        self,
        key: str,
        namespace: str | None = None,
        *,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
    ) -> tuple[list[Obj], str]:
        """Deep copies of the matching objects (sorted by namespace, name) and the list's
        resourceVersion."""
        entries, rv = self.list_entries(
            key,
            namespace,
            _labels(label_selector),
            _fields(field_selector, self.types.resource_type(key)),
        )
        return [e.thaw() for e in entries], str(rv)

    def list_entries(
        self, key: str, namespace: str | None, labels: LabelSelector, fields: FieldSelector
    ) -> tuple[list[_Held], int]:
        """Shared (read-only!) entries for the HTTP layer, which encodes without copying."""
        rt = self.types.resource_type(key)
        with self._lock:
            table = self._objects[rt.key]
            keys = self._sorted[rt.key]
            if keys is None:
                keys = self._sorted[rt.key] = sorted(table)
            if namespace is not None:
                start = bisect.bisect_left(keys, (namespace, ""))
                end = bisect.bisect_left(keys, (namespace + "\0", ""))
                keys = keys[start:end]
            out = [table[k] for k in keys]
            if labels.requirements:
                out = [e for e in out if labels.matches(e.obj["metadata"].get("labels"))]
            if fields.requirements:
                out = [e for e in out if fields.matches(e.obj)]
            return out, self._rv

    def list_entries_at(
        self,
        key: str,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        resource_version: int,
    ) -> list[_Held]:
        """The matching objects as they were at ``resource_version`` (an exact read):
        the current ones with the later changes of this type undone from the history.
        410 when that history was compacted, 504 when the store is not there yet."""
        rt = self.types.resource_type(key)
        with self._lock:
            if resource_version > self._rv:
                raise errors.too_large_resource_version(resource_version, self._rv)
            if resource_version < self._compacted[rt.key]:
                raise errors.gone("The resourceVersion for the provided list is too old.")
            table: dict[tuple[str, str], _Held] = dict(self._objects[rt.key])
            for event in reversed(self._history[rt.key]):
                if event.rv <= resource_version:
                    break
                object_key = _key_of(event.obj)
                if event.prev is None:
                    table.pop(object_key, None)
                else:
                    table[object_key] = _Entry(event.prev)
            out = [table[k] for k in sorted(table) if namespace is None or k[0] == namespace]
        if labels.requirements:
            out = [e for e in out if labels.matches(e.obj["metadata"].get("labels"))]
        if fields.requirements:
            out = [e for e in out if fields.matches(e.obj)]
        return out

    def count(self, key: str) -> int:
        with self._lock:
            return len(self._objects[self.types.resource_type(key).key])

    def _entry(self, key: str, namespace: str | None, name: str) -> _Held:
        rt = self.types.resource_type(key)
        entry = self._objects[rt.key].get((namespace or "" if rt.namespaced else "", name))
        if entry is None:
            raise errors.not_found(rt.plural, name, rt.group)
        return entry

    # --- writes --------------------------------------------------------------------

    def add_listener(
        self, fn: Listener, kinds: Iterable[str] | None = None, *, skip: Iterable[str] = ()
    ) -> None:
        """Call ``fn(key, event_type, obj)`` after every commit of one of ``kinds`` (resource
        keys such as ``"pods"``; None: every kind) that is not in ``skip``, with the store
        lock held: it must be quick and must not wait for other threads that use the
        store. Listeners are called in the order they were added."""
        wanted = None if kinds is None else frozenset(kinds)
        with self._lock:
            self._listeners.append((fn, wanted, frozenset(skip)))
            self._dispatch = {}

    def _listeners_for(self, key: str) -> tuple[Listener, ...]:
        """Caller holds the lock. The listeners a commit of ``key`` calls, in order."""
        found = self._dispatch.get(key)
        if found is None:
            found = tuple(
                fn
                for fn, wanted, skip in self._listeners
                if (wanted is None or key in wanted) and key not in skip
            )
            self._dispatch[key] = found
        return found

    def priorities(self) -> dict[str, int]:
        """PriorityClass name -> value, the built-in classes included (what admission
        gives a pod; ``kinds.Context``)."""
        prio = dict(objects.BUILTIN_PRIORITY_CLASSES)
        for entry in self._objects["priorityclasses.scheduling.k8s.io"].values():
            prio[entry.obj["metadata"]["name"]] = entry.obj.get("value", 0)
        return prio

    def serves(self, group: str, version: str, plural: str) -> bool:
        """Whether this store serves that type (``kinds.Context``: a CRD's names)."""
        return self.types.lookup(group, version, plural) is not None

    def create(
        self,
        key: str,
        obj: Obj,
        *,
        namespace: str | None = None,
        create_namespace: bool = True,
        prepare: Callable[[Obj], None] | None = None,
        copy: bool = True,
        aside: bool = False,
        trusted: bool = False,
        built: bool = False,
    ) -> Obj | None:
        """Admit and store a new object; returns a copy as stored (None with ``copy=False``:
        the broker's own writes mostly do not look, and the copy is a decode).
        ``aside``: an object the broker writes beside the run (an Event of its own),
        named by the caller, its uid drawn from a stream of its own; it is built of JSON
        types by the broker and handed over (not copied).
        ``trusted``: an object the broker built itself of JSON types, known admissible
        (its Events: ``broker/controllers/events.py``), handed over as it is and stored
        without the decoding, defaulting and validation a client's body gets — the stored
        bytes are the admitted ones (tests/test_store_trusted.py compares both paths).
        ``built``: an object the broker built of JSON types, its keys strings (the pod of
        a workload's job, of a controller), of a kind that ``admits_by_shape``: admitted
        once per shape. When its parts but the metadata encode as those of one admitted
        before (with the same PriorityClasses and CRDs), they are that one's admitted
        parts, shared, and only its metadata is decoded and validated; anything else
        goes the client's way. The stored bytes and every failure are the client path's
        (tests/test_store_built.py); ``prepare`` may then edit the metadata only.

        ``namespace`` (if given) must agree with ``metadata.namespace``. A missing
        namespace is created when ``create_namespace`` (the broker's convenience), else
        404 (what an API client gets). ``prepare(obj)`` runs after the defaults, before
        the commit, under the store lock (the facade's ``on_create`` hook).
        """
        rt = self.types.resource_type(key)
        shape = own = None  # a broker-built object's shape, its metadata decoded
        if trusted:  # the broker's own: decoding, defaults and validation change nothing
            obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        elif built and rt.strategy.admits_by_shape:
            shape, own = self._shaped(rt, obj)
        if own is None and not trusted:
            obj = self._new_object(rt, obj, trusted=aside)
        with self._lock:
            if own is not None:
                parts = self._shapes.get((rt.key, shape))
                if parts is None:  # forgotten meanwhile: the admission context changed
                    own, obj = None, self._new_object(rt, obj)
                else:
                    obj = {k: own if k == "metadata" else v for k, v in parts.items()}
            meta = obj["metadata"]
            self._expire_locked()
            self._place_locked(rt, meta, namespace, create_namespace)
            self._name_locked(rt, obj)
            meta["uid"] = objects.new_uid(self._aside_rng if aside else self._rng)
            meta["creationTimestamp"] = self.timestamp()
            for field in ("deletionTimestamp", "selfLink"):
                meta.pop(field, None)
            if own is not None:  # the rest of it is admitted: its metadata's own validation
                rt.strategy.raise_invalid(rt, obj, rt.strategy.validate_metadata(rt, obj))
            elif not trusted:
                _default_and_validate(rt, obj, self)
                if shape is not None:
                    self._remember_shape(rt, shape, obj)
            if prepare is not None:
                prepare(obj)
            # (no size limit here: an API create is bounded by the request body's limit,
            # and the broker's own objects may be as large as it likes)
            entry = self._commit(rt, "ADDED", obj, None)
            return entry.thaw() if copy else None

    def _shaped(self, rt: ResourceType, obj: Obj) -> tuple[bytes | None, Obj | None]:
        """A broker-built object's shape (everything but its metadata, encoded: what the
        admission of those parts reads; None when it has none) and, if a create admitted
        that shape (the caller checks it still is under the lock), the object's metadata
        decoded (None: shape not known, or the metadata does not decode: the client
        path says why)."""
        meta = obj.get("metadata") if type(obj) is dict else None
        if type(meta) is not dict or not meta.get("name"):
            return None, None
        self._built += 1
        if self._shape_rate < SHAPE_RATE_FLOOR and self._built % SHAPE_PROBE:
            return None, None  # shapes seldom repeat now: no encoding to look one up
        try:  # the metadata's place among the keys is part of the shape
            shape = _dumps({k: None if k == "metadata" else v for k, v in obj.items()})
        except TypeError:
            return None, None
        known = (rt.key, shape) in self._shapes
        self._shape_rate += (known - self._shape_rate) / 8
        if not known:
            return shape, None
        try:
            own = {"metadata": canonical(meta)}
            rt.strategy.decode(rt, own)  # the metadata alone (the rest is absent)
        except (TypeError, errors.ApiError):
            return shape, None
        return shape, own["metadata"]

    def _remember_shape(self, rt: ResourceType, shape: bytes, obj: Obj) -> None:
        """Caller holds the lock. ``obj``, just admitted, as its shape's admitted parts
        (its metadata left out); the oldest shape forgotten past ``SHAPES_KEPT``."""
        shapes = self._shapes
        if len(shapes) >= SHAPES_KEPT:
            del shapes[next(iter(shapes))]
        shapes[(rt.key, shape)] = {k: None if k == "metadata" else v for k, v in obj.items()}

    @staticmethod
    def _new_object(rt: ResourceType, obj: Obj, *, trusted: bool = False) -> Obj:
        """A private, JSON-only copy of a body to create, with its metadata, apiVersion
        and kind, decoded as the Go types would be (400 for what is not an object).
        ``trusted``: the caller's own JSON object, handed over as it is."""
        try:
            obj = obj if trusted else canonical(obj)
        except TypeError as exc:
            raise errors.bad_request(f"{rt.kind} is not JSON-serialisable: {exc}") from None
        if not isinstance(obj, dict):
            raise errors.bad_request(f"the body of a {rt.kind} must be a JSON object")
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be a JSON object")
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        rt.strategy.decode(rt, obj)
        return obj

    def _place_locked(
        self, rt: ResourceType, meta: Obj, namespace: str | None, create_namespace: bool
    ) -> None:
        """The new object's namespace: the body's, else the request's, else ``default``;
        it must exist (or be made, for the broker) and not be terminating. A cluster-scoped
        object has none."""
        if not rt.namespaced:
            meta.pop("namespace", None)
            return
        ns = meta.get("namespace") or namespace or "default"
        if namespace is not None and ns != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace "
                f"sent on the request ({ns!r} != {namespace!r})"
            )
        meta["namespace"] = ns
        ns_entry = self._objects["namespaces"].get(("", ns))
        if ns_entry is None:
            if not create_namespace:
                raise errors.not_found("namespaces", ns)
            self.create("namespaces", {"metadata": {"name": ns}})
        elif not create_namespace and ns_entry.obj["metadata"].get("deletionTimestamp"):
            raise errors.ApiError(
                403,
                f'{rt.plural} "{meta.get("name") or meta.get("generateName", "")}" is '
                f"forbidden: unable to create new content in namespace {ns} because it "
                "is being terminated",
                "Forbidden",
                kind=rt.plural,
                name=str(meta.get("name") or ""),
            )

    def _expire_locked(self) -> None:
        """Remove the objects whose time to live is over (Events)."""
        for key, namespace, name in self._expiry.due(self.clock.now_ns()):
            entry = self._objects[key].get((namespace, name))
            if entry is not None:  # as delete() without the decode of what it returns
                self._remove_locked(self.types.resource_type(key), name, entry.obj)

    def _name_locked(self, rt: ResourceType, obj: Obj) -> None:
        """The new object's name: its own, or one made from ``generateName``; 409 when
        the name is taken."""
        meta = obj["metadata"]
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                rt.strategy.validate(rt, obj)  # names what is missing (and all else)
            for _ in range(8):
                meta["name"] = objects.generated_name(prefix, self._rng)
                if _key_of(obj) not in self._objects[rt.key]:
                    break
        if _key_of(obj) in self._objects[rt.key]:
            raise errors.already_exists(rt.plural, meta["name"], rt.group)

    def replace(
        self,
        key: str,
        obj: Obj,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        """PUT semantics: 409 if ``metadata.resourceVersion`` is set and stale; uid and
        creationTimestamp are kept. With ``subresource="status"`` only ``status`` changes;
        without, ``status`` is kept for types that have a status subresource."""
        rt = self.types.resource_type(key)
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise errors.bad_request(f"the body of a {rt.kind} must be a JSON object with metadata")
        meta = obj.get("metadata") or {}
        name = name or meta.get("name")
        if not name:
            raise errors.bad_request("metadata.name is required")
        if meta.get("name") not in (None, name):
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})"
            )
        if rt.namespaced and namespace and meta.get("namespace") not in (None, namespace):
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        with self._lock:
            entry = self._entry(key, namespace, name)
            _check_resource_version(rt, name, entry.obj, meta.get("resourceVersion"))
            return self._update_from(rt, entry, obj, subresource)

    def _update_from(
        self, rt: ResourceType, entry: _Held, new: Obj, subresource: str | None
    ) -> Obj:
        current = entry.obj
        try:
            new = canonical(new)
        except TypeError as exc:
            raise errors.bad_request(f"{rt.kind} is not JSON-serialisable: {exc}") from None
        if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
            raise errors.bad_request(f"the body of a {rt.kind} must be a JSON object with metadata")
        rt.strategy.decode(rt, new)
        if subresource == "status":
            merged = entry.thaw()
            if "status" in new:
                merged["status"] = new["status"]
            new = merged
        else:
            if "status" in rt.subresources and "status" in current:
                new["status"] = _thaw(current["status"])
            elif "status" in rt.subresources:
                new.pop("status", None)
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        meta = new.setdefault("metadata", {})
        old_meta = current["metadata"]
        # Kept from the stored object; resourceVersion too, so that an unchanged object
        # compares equal below (the commit assigns the next one anyway).
        for field in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "generation",
            "resourceVersion",
        ):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        _keep_deletion(rt, meta, old_meta)
        rt.strategy.prepare_for_update(rt, new, current, subresource)
        if "generation" in old_meta and new.get("spec") != current.get("spec"):
            meta["generation"] = old_meta["generation"] + 1
        if new == current and same_json(new, current):
            return entry.thaw()  # a no-op write does not bump resourceVersion
        rt.strategy.validate(rt, new)
        if rt.strategy.deletion == "immediate" and meta.get("deletionTimestamp"):
            if not meta.get("finalizers"):  # the last finalizer removed: the object goes
                return self._commit(rt, "DELETED", new, current).thaw()
        return self._commit(rt, "MODIFIED", new, current, limit=True).thaw()

    def patch(
        self,
        key: str,
        namespace: str | None,
        name: str,
        patch: Any,
        patch_type: str = "application/merge-patch+json",
        *,
        subresource: str | None = None,
        view: tuple[Callable[[Obj], Obj], Callable[[Any], Any]] | None = None,
    ) -> Obj:
        """``view``: (the stored object as the patch's version shows it, the patched
        result back as stored) for a patch through another version (``versions.py``)."""
        rt = self.types.resource_type(key)
        with self._lock:
            entry = self._entry(key, namespace, name)
            current = entry.obj
            if view is None:
                new = apply_patch(patch_type, current, patch)
            else:
                new = view[1](apply_patch(patch_type, view[0](current), patch))
            want_rv = (new.get("metadata") or {}).get("resourceVersion")
            if want_rv not in (None, "", current["metadata"]["resourceVersion"]):
                raise errors.conflict(rt.plural, name, "the object has been modified", rt.group)
            return self._update_from(rt, entry, new, subresource)

    def set_replicas(
        self,
        key: str,
        namespace: str | None,
        name: str,
        replicas: int,
        *,
        resource_version: str | None = None,
    ) -> Obj:
        """What a write to the ``scale`` subresource does: the object's ``spec.replicas``
        (its generation moves on), with optimistic concurrency on ``resource_version``.
        Returns the object as stored."""
        rt = self.types.resource_type(key)
        with self._lock:
            entry = self._entry(key, namespace, name)
            _check_resource_version(rt, name, entry.obj, resource_version)
            new = entry.thaw()
            if "status" in rt.subresources:
                new.pop("status", None)  # a write of the object keeps the stored status as is
            rt.strategy.with_replicas(new, replicas)
            return self._update_from(rt, entry, new, None)

    def update(
        self,
        key: str,
        namespace: str | None,
        name: str,
        mutate: Callable[[Obj], Any],
        *,
        copy: bool = True,
    ) -> Obj | None:
        """Atomic read-modify-write for the broker: ``mutate`` gets a copy of the object
        (under the store lock) and edits it in place; the whole object (spec, status,
        nodeName) is written as edited. Returns the stored copy (None with ``copy=False``).

        Only what ``mutate`` changed is canonicalised again (a value JSON cannot encode:
        400, nothing stored); the rest is shared with the stored version."""
        rt = self.types.resource_type(key)
        with self._lock:
            entry = self._entry(key, namespace, name)
            current = entry.obj
            new = _clone(current)
            mutate(new)
            return self._edited_locked(rt, entry, new, copy)

    def update_status(
        self,
        key: str,
        namespace: str | None,
        name: str,
        mutate: Callable[[Obj], Any],
        *,
        copy: bool = True,
        trusted: bool = False,
    ) -> Obj | None:
        """:meth:`update` for a broker-side write of an object's ``status`` and
        ``metadata`` only (the kubelet's status writes, a job's completion): ``mutate``
        gets an object whose ``metadata`` and ``status`` are copies it may edit and whose
        other parts (``spec``…) are the stored ones, shared: it must not change them
        (stored objects are never changed). What is stored, its resourceVersion, its
        watch frames and the listeners' calls are :meth:`update`'s with the same
        ``mutate`` (tests/test_store_status.py); the parts left alone are neither copied
        nor walked again (a spec replaced as a whole is re-shared as update does).

        ``trusted``: every value ``mutate`` puts in is the broker's own, built of JSON
        types (string keys, lists, finite numbers) and referenced by nothing it changes
        later (the kubelet's and a job's status functions): stored as it is, not copied
        and checked (:data:`_trusted_stored_edit`); the same bytes
        (tests/test_store_trusted_status.py)."""
        rt = self.types.resource_type(key)
        with self._lock:
            entry = self._entry(key, namespace, name)
            current = entry.obj
            new = {k: _clone(v) if k in _OWN_PARTS else v for k, v in current.items()}
            mutate(new)
            return self._edited_locked(rt, entry, new, copy, trusted)

    def _edited_locked(
        self, rt: ResourceType, entry: _Held, new: Obj, copy: bool, trusted: bool = False
    ) -> Obj | None:
        """Caller holds the lock. Commit ``new``, the broker's edit of ``entry``'s object
        (unless it changed nothing), its unchanged parts shared with the stored ones (its
        new parts taken as they are when ``trusted``)."""
        current = entry.obj
        if _key_of(new) != _key_of(current):
            raise ValueError(
                f"update() may not rename {rt.key} {_key_of(current)} to {_key_of(new)}"
            )
        new["metadata"]["uid"] = current["metadata"]["uid"]
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if new != current:
            try:
                new = (_trusted_stored_edit if trusted else _stored_edit)(new, current)
            except TypeError as exc:
                raise errors.bad_request(f"{rt.kind} is not JSON-serialisable: {exc}") from None
            entry = self._commit(rt, "MODIFIED", new, current)
        return entry.thaw() if copy else None

    def bind(
        self,
        namespace: str,
        name: str,
        node_name: str,
        *,
        uid: str | None = None,
        copy: bool = True,
    ) -> Obj | None:
        """What the binding subresource does: set ``spec.nodeName`` once and mark the pod
        ``PodScheduled=True``. 409 if already bound (or uid precondition fails). Returns the
        bound pod (None with ``copy=False``)."""
        if not node_name:
            raise errors.invalid("Binding", name, ["target.name: Required value"])
        with self._lock:
            entry = self._entry("pods", namespace, name)
            current = entry.obj
            if uid and current["metadata"]["uid"] != uid:
                raise errors.conflict(
                    "pods",
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {current['metadata']['uid']}",
                )
            bound = (current.get("spec") or {}).get("nodeName")
            if bound:
                raise errors.conflict(
                    "pods", name, f'pod {name} is already assigned to node "{bound}"'
                )
            if current["metadata"].get("deletionTimestamp"):
                raise errors.conflict(
                    "pods", name, "pod is being deleted, cannot be assigned to a host"
                )
            # the spec's top level its own (nodeName is set), the rest of it shared
            new = {k: _clone(v) if k in _OWN_PARTS else v for k, v in current.items()}
            new["spec"] = dict(current["spec"])
            # (interned as canonical() would: the pods of a node share its name)
            new["spec"]["nodeName"] = _intern(node_name) if type(node_name) is str else node_name
            status = new.setdefault("status", {})
            conditions = [
                c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": self.timestamp(),
                }
            )
            status["conditions"] = conditions
            # what the binding made is the store's own (fresh dicts of strings), but for
            # the node's name, a client's: trusted when it is a string
            edit = _trusted_stored_edit if type(node_name) is str else _stored_edit
            entry = self._commit(
                self.types.resource_type("pods"), "MODIFIED", edit(new, current), current
            )
            return entry.thaw() if copy else None

    def delete(
        self,
        key: str,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        finalizers: bool = False,
    ) -> Obj:
        """Remove the object now (no graceful deletion); returns its last state. Deleting a
        namespace deletes what it contains first. ``uid``/``resource_version`` are
        preconditions (409 when they do not hold). With ``finalizers`` (an API DELETE), an
        object whose ``metadata.finalizers`` is not empty is only marked
        (``deletionTimestamp``, ``deletionGracePeriodSeconds: 0``) and returned as it now
        is: it goes when an update removes its last finalizer (``_update_from``)."""
        rt = self.types.resource_type(key)
        with self._lock:
            entry = self._entry(key, namespace, name)
            current = entry.obj
            if uid and current["metadata"]["uid"] != uid:
                raise errors.conflict(
                    rt.plural,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: {current['metadata']['uid']}",
                    rt.group,
                )
            if resource_version and current["metadata"]["resourceVersion"] != resource_version:
                raise errors.conflict(
                    rt.plural,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: {resource_version}, ResourceVersion in object meta: {current['metadata']['resourceVersion']}",
                    rt.group,
                )
            if finalizers and current["metadata"].get("finalizers"):
                if current["metadata"].get("deletionTimestamp"):
                    return entry.thaw()  # already being deleted
                marked = entry.thaw()
                marked["metadata"]["deletionTimestamp"] = self.timestamp()
                marked["metadata"]["deletionGracePeriodSeconds"] = 0
                return self._commit(rt, "MODIFIED", marked, current).thaw()
            return self._remove_locked(rt, name, current).thaw()

    def remove(self, key: str, namespace: str | None, name: str) -> Obj | None:
        """Delete the object now if it is stored (as :meth:`delete` without preconditions
        nor finalizers); returns its stored state *before* the deletion, **shared,
        read-only** (None when absent). For the broker's own deletions of what it knows
        (``ControllerPods.delete_controlled_pod``: the terminated-pod GC's, ~0.9 per pod at
        10k × 100k): a ``get_or_none`` and a ``delete`` decoded the pod twice."""
        rt = self.types.resource_type(key)
        with self._lock:
            entry = self._objects[rt.key].get((namespace or "", name))
            if entry is None:
                return None
            current = entry.obj
            self._remove_locked(rt, name, current)
            return current

    def _remove_locked(self, rt: ResourceType, name: str, current: Obj) -> _Held:
        """Caller holds the lock. Remove the stored ``current`` (and, for a namespace,
        what it holds) now, with its DELETED commit; the held last state is returned
        undecoded (an expiring Event's caller wants none of it)."""
        if rt.strategy.holds_namespace_content:
            for other in self.types.stored_types():
                if other.namespaced:
                    for k in [k for k in self._objects[other.key] if k[0] == name]:
                        self.delete(other.key, name, k[1])
        # its last state: the stored one's parts, shared (stored objects are never
        # changed), but its own top level and metadata, which the deletion stamps (a
        # packed Event's ``entry.obj`` is a decode already: no second one)
        gone = {**current, "metadata": dict(current["metadata"])}
        gone["metadata"]["deletionTimestamp"] = self.timestamp()
        return self._commit(rt, "DELETED", gone, current)

    def terminate_namespace(
        self, name: str, *, uid: str | None = None, resource_version: str | None = None
    ) -> Obj:
        """The first step of a namespace's deletion: ``deletionTimestamp`` set and
        ``status.phase: Terminating`` (API creates in it are refused from now on).
        Preconditions as for :meth:`delete`. Returns the namespace as it now is."""
        with self._lock:
            entry = self._entry("namespaces", None, name)
            current = entry.obj
            for value, field, label in (
                (uid, "uid", "UID"),
                (resource_version, "resourceVersion", "ResourceVersion"),
            ):
                if value and current["metadata"][field] != value:
                    raise errors.conflict(
                        "namespaces",
                        name,
                        f"Precondition failed: {label} in precondition: {value}, {label} in "
                        f"object meta: {current['metadata'][field]}",
                    )
            if current["metadata"].get("deletionTimestamp"):
                return entry.thaw()
            new = entry.thaw()
            new["metadata"]["deletionTimestamp"] = self.timestamp()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new.setdefault("status", {})["phase"] = "Terminating"
            return self._commit(
                self.types.resource_type("namespaces"), "MODIFIED", new, current
            ).thaw()

    def delete_namespace_content(self, name: str, *, keep: tuple[str, ...] = ()) -> None:
        """Delete what the namespace ``name`` holds (but the types in ``keep``), type by
        type, each by name."""
        with self._lock:
            for other in self.types.stored_types():
                if other.namespaced and other.key not in keep:
                    for key in sorted(k for k in self._objects[other.key] if k[0] == name):
                        self.delete(other.key, name, key[1])

    def finalize_namespace(self, name: str) -> None:
        """The namespace controller's end of a deletion: what is left in the namespace is
        deleted, the ``kubernetes`` finalizer removed, then the namespace is gone."""
        with self._lock:
            self.delete_namespace_content(name)
            entry = self._entry("namespaces", None, name)
            new = entry.thaw()
            new.setdefault("spec", {})["finalizers"] = []
            self._commit(self.types.resource_type("namespaces"), "MODIFIED", new, entry.obj)
            self.delete("namespaces", None, name)

    def _commit(
        self, rt: ResourceType, type_: str, obj: Obj, prev: Obj | None, *, limit: bool = False
    ) -> _Held:
        """Caller holds the lock. Assign the next revision, store, record, fan out.
        ``obj`` belongs to the store from now on. With ``limit`` (an API write), an
        object larger than ``MAX_OBJECT_BYTES`` is refused (413) and nothing changes."""
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        if rt.key in _CONTEXT_KINDS:  # what admission reads changes: shapes re-admitted
            self._shapes.clear()
        entry = (_Packed if rt.strategy.packed else _Entry)(obj)
        size = len(entry.json())  # encoded once: the history's weight, and every reader's
        if limit and size > MAX_OBJECT_BYTES:
            self._rv -= 1
            raise errors.too_large(MAX_OBJECT_BYTES)
        table = self._objects[rt.key]
        if type_ == "DELETED":
            del table[_key_of(obj)]
            self._sorted[rt.key] = None
        else:
            if type_ == "ADDED":
                self._sorted[rt.key] = None
            table[_key_of(obj)] = entry
        ttl_s = rt.strategy.ttl_s
        if ttl_s is not None:  # each write renews the lease; a deletion ends it
            ns, name = _key_of(obj)
            if type_ == "DELETED":
                self._expiry.forget(rt.key, ns, name)
            else:
                self._expiry.set(rt.key, ns, name, self.clock.now_ns() + int(ttl_s * 1e9))
        event = StoredEvent(self._rv, type_, entry, prev)
        self._record(rt.key, event, size)
        self._fan_out(rt, type_, obj, event)
        return entry

    def _record(self, key: str, event: StoredEvent, size: int) -> None:
        history, sizes = self._history[key], self._history_sizes[key]
        history.append(event)
        sizes.append(size)
        self._history_total[key] += size
        while len(history) > 1 and (
            len(history) > self.history_limit or self._history_total[key] > self.history_bytes
        ):
            self._compacted[key] = history.popleft().rv
            self._history_total[key] -= sizes.popleft()

    def _fan_out(self, rt: ResourceType, type_: str, obj: Obj, event: StoredEvent) -> None:
        """Every watcher and every listener of the kind hears of the commit, whatever one of them
        raises: a watcher that fails is ended (its client re-lists, as after any end);
        the first listener failure is raised once all have been called."""
        gone: list[Watcher] = []
        for watcher in self._watchers[rt.key]:
            try:
                watcher.offer(event, obj)
            except Exception:
                _log.exception("facade: a %s watcher failed on an event; ending it", rt.key)
                gone.append(watcher)
            else:
                if watcher.overflowed:  # its client stopped reading: dropped, as the
                    gone.append(watcher)  # watch cache drops an unresponsive watcher
                    self.dropped_watchers += 1
        for watcher in gone:
            self._watchers[rt.key].pop(watcher, None)
            watcher.end()
        failure: BaseException | None = None
        for listener in self._listeners_for(rt.key):
            try:
                listener(rt.key, type_, obj)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    # --- watches -------------------------------------------------------------------

    def watch(
        self,
        key: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | LabelSelector | None = None,
        field_selector: str | FieldSelector | None = None,
        bookmarks: bool = False,
        send_initial_events: bool | None = None,
        on_queued: Callable[[bytes | None], None] | None = None,
        on_overflow: Callable[[], None] | None = None,
        recode: Callable[[bytes], bytes] | None = None,
    ) -> Watcher:
        """Start a watch. Without a resourceVersion (or "0") the current matching objects
        come first as ADDED events (``send_initial_events`` forces or suppresses that);
        with one, every later change is replayed from history, or ApiError(410) if
        compacted — unless ``send_initial_events``: then the state now (not older than
        it) comes first. With ``bookmarks``, initial events end with the
        ``k8s.io/initial-events-end`` bookmark. A resourceVersion the store has not
        reached is ApiError(504) "Too large resource version"."""
        rt = self.types.resource_type(key)
        labels, fields = _labels(label_selector), _fields(field_selector, rt)
        watcher = Watcher(
            rt,
            namespace,
            labels,
            fields,
            bookmarks=bookmarks,
            on_queued=on_queued,
            on_overflow=on_overflow,
            max_queued_bytes=self.watch_queue_bytes,
            recode=recode,
        )
        with self._lock:
            start, initial = self._watch_start_locked(rt, resource_version, send_initial_events)
            if initial:
                self._send_initial_locked(watcher, rt, namespace, labels, fields)
                if send_initial_events and bookmarks:  # bookmarks must be allowed
                    watcher.push(
                        event_frame("BOOKMARK", bookmark_object(rt, self._rv, True)),
                        self._rv,
                        bounded=False,
                    )
            else:
                for event in self._history[rt.key]:  # replayed: the start, never dropped
                    if event.rv > start:
                        watcher.offer(event, bounded=False)
            self._watchers[rt.key][watcher] = None
        return watcher

    def _watch_start_locked(
        self, rt: ResourceType, resource_version: str | None, send_initial_events: bool | None
    ) -> tuple[int, bool]:
        """(the revision the watch starts after, whether the state now comes first as
        initial events), as kube-apiserver reads ``resourceVersion`` and
        ``sendInitialEvents``; 504 for a revision not reached, 410 for a compacted one."""
        if resource_version in (None, "", "0"):
            initial = True if send_initial_events is None else send_initial_events
            return self._rv, initial
        start = listoptions.resource_version(resource_version)
        if start > self._rv:
            raise errors.too_large_resource_version(start, self._rv)
        if start < self._compacted[rt.key] and not send_initial_events:
            raise errors.gone(f"too old resource version: {start} ({self._compacted[rt.key] + 1})")
        initial = bool(send_initial_events)
        if initial:
            start = self._rv  # "not older than": the state now, then what follows
        return start, initial

    def _send_initial_locked(
        self,
        watcher: Watcher,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
    ) -> None:
        """The matching objects as they are now, as ADDED events."""
        entries, _ = self.list_entries(rt.key, namespace, labels, fields)
        for entry in entries:  # the initial state: never a reason to drop
            watcher.push(
                event_frame("ADDED", entry.json()),
                int(entry.obj["metadata"]["resourceVersion"]),
                bounded=False,
            )

    def bookmark(self, watcher: Watcher) -> bool:
        """Queue a BOOKMARK at the current revision: resuming from it loses nothing."""
        with self._lock:
            if watcher not in self._watchers[watcher.rt.key]:
                return False
            return watcher.push(
                event_frame("BOOKMARK", bookmark_object(watcher.rt, self._rv)), self._rv
            )

    def stop_watch(self, watcher: Watcher, *, end: bool = True) -> None:
        """Detach; with ``end`` also queue the end of the stream."""
        with self._lock:
            self._watchers[watcher.rt.key].pop(watcher, None)
            if end:
                watcher.end()

    def watcher_count(self, key: str | None = None) -> int:
        """Open watches, of one stored type's key or of all."""
        with self._lock:
            if key is not None:
                return len(self._watchers.get(key) or ())
            return sum(len(w) for w in self._watchers.values())

    def history_size(self, key: str) -> int:
        with self._lock:
            return len(self._history[self.types.resource_type(key).key])
