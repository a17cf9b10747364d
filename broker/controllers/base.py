"""What the broker's controllers (Job, ReplicaSet, Deployment) share: kube-controller-
manager's work-queue pattern, in virtual time.

The store listener (store lock held) only marks the objects that changed, as
``(namespace, name)`` keys under the controller's own lock; :meth:`KeyedController.reconcile`
runs in the broker's driver thread and syncs the marked objects in sorted order, so runs
are reproducible. Each object has a state (its uid, its virtual-time wake-ups), forgotten
— timers cancelled — when the object is deleted or re-created under the same name.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from broker.clock.wake_timers import WakeTimers
from broker.controllers.typed import TypedStore
from broker.facade.store import Store

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)


class PodOps(Protocol):
    """What a controller may do to pods in the simulated cluster
    (``broker/cluster/controller_pods.py``), beyond reading and writing the store."""

    def create_controlled_pod(self, pod: Obj) -> Obj:
        """Store the pod (through admission) and make it a Batsim job if it can be one;
        returns it as stored."""
        ...

    def delete_controlled_pod(self, namespace: str, name: str) -> None:
        """Delete the pod now and kill (or reject) its Batsim job."""
        ...

    def terminate_pod(self, namespace: str, name: str) -> None:
        """Delete the pod as a DELETE with default options would (gracefully)."""
        ...

    def simulates(self, template: Obj) -> bool:
        """Whether pods made from ``template`` become Batsim jobs (they will end)."""
        ...

    def may_create_for(self, template: Obj) -> bool:
        """False when pods from ``template`` should no longer be made (a service over)."""
        ...

    def defer_creations(self, kind: str, namespace: str, name: str, later: int) -> None:
        """The ``kind`` (ReplicaSet, Job) ``name`` leaves ``later`` pods to later bursts
        (0: none); the run's summary says how many were still to make at the end."""
        ...


@dataclass
class ControllerState:
    """The controller's memory of one object: whose (uid) and its pending wake-ups."""

    uid: str
    timers: WakeTimers = field(default_factory=WakeTimers)
    # creating pods (broker/controllers/bursts.py): failed rounds in a row (the work
    # queue's back-off), when the next burst may come, whether the deferral was told
    failures: int = 0
    next_burst_ns: int | None = None
    warned: bool = False


S = TypeVar("S", bound=ControllerState)


class KeyedController(Generic[S]):
    """The marking, draining and timers of a controller. A subclass names the resources
    whose existing objects count as changed on :meth:`start` (``watches``), its state
    type (``state_type``), and implements ``_on_change`` (the store listener), ``_sync``
    (one object) and, when it deletes dependents of deleted owners, ``_collect_garbage``
    for the entries it appends to ``_garbage``."""

    watches: tuple[str, ...] = ()
    # the kinds ``_on_change`` acts on (None: every kind); the store calls it for no other
    listens: tuple[str, ...] | None = None
    owns: tuple[str, ...] = ()  # the kinds whose objects it rewrites (decoded first)
    state_type: type[S]

    def __init__(self, store: Store, clock: Any, pods: PodOps) -> None:
        # what it reads is decoded as Go types would be (broker/controllers/typed.py):
        # a malformed stored field reads as absent, never kills the driver thread
        self.store: Any = TypedStore(store, self.owns)
        self.clock = clock  # now_ns(), wall_epoch_ns(), call_at(deadline_ns, fn)
        self.pods = pods
        self._lock = threading.Lock()
        self._dirty: set[Key] = set()
        self._garbage: list[tuple[Any, ...]] = []  # deleted owners whose dependents go
        self._states: dict[Key, S] = {}
        self._started = False

    def start(self) -> None:
        """Begin watching the store; the objects already there count as changed.
        Idempotent."""
        if self._started:
            return
        self._started = True
        self.store.add_listener(self._on_change, self.listens)
        for key in self.watches:
            for obj in self.store.list(key)[0]:
                self._on_change(key, "ADDED", obj)

    def _on_change(self, key: str, event: str, obj: Obj) -> None:
        raise NotImplementedError

    def mark(self, namespace: str, name: str) -> None:
        """Look at this object in the next :meth:`reconcile`."""
        with self._lock:
            self._dirty.add((namespace, name))

    def has_work(self) -> bool:
        with self._lock:
            return bool(self._dirty or self._garbage)

    def keeps_simulation_alive(self, now_ns: int) -> bool:
        """Whether this controller may still make pods that become Batsim jobs: the
        broker must not tell Batsim that registration is finished while one says so."""
        return False

    def reconcile(self) -> bool:
        """Collect the deleted owners' dependents, then bring every marked object to its
        wanted state, in sorted order; True if anything was written."""
        with self._lock:
            dirty, self._dirty = sorted(self._dirty), set()
            garbage, self._garbage = self._garbage, []
        did = False
        for entry in garbage:
            did = self._collect_garbage(*entry) or did
        for namespace, name in dirty:
            did = self._sync(namespace, name) or did
        return did

    def _collect_garbage(self, *entry: Any) -> bool:
        raise NotImplementedError

    def _sync(self, namespace: str, name: str) -> bool:
        raise NotImplementedError

    # ------------------------------------------------------------ per-object state
    def state_for(self, key: Key, uid: str) -> S:
        """The state of the object ``key`` with ``uid``: a new one (the old one's timers
        cancelled) when the object was re-created under the same name."""
        state = self._states.get(key)
        if state is None or state.uid != uid:
            if state is not None:
                state.timers.cancel()
            state = self._states[key] = self.state_type(uid)
        return state

    def forget(self, key: Key) -> None:
        """The object is gone (or no longer this controller's): cancel its timers."""
        state = self._states.pop(key, None)
        if state is not None:
            state.timers.cancel()

    def wake_at(self, state: S, key: Key, deadline_ns: int) -> None:
        """Mark ``key`` again at virtual instant ``deadline_ns`` (once per instant)."""
        state.timers.wake_at(self.clock, deadline_ns, lambda: self.mark(*key))
