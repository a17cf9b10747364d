"""How the controllers create pods, as kube-controller-manager does: in slow-start batches,
at most a burst per round, and — in virtual time — at most one burst per instant.

``slowStartBatch`` creates 1, then 2, 4, … pods; a batch with a failure (each one a
``FailedCreate`` Event, written by the caller) ends the round, retried after the work
queue's back-off (5 ms doubling, at most 1000 s). A round creates at most 500 pods (the
ReplicaSet controller's ``burstReplicas``, the Job controller's
``MaxPodCreateDeletePerSync``). An owner still short after a full burst makes its next one
:data:`BURST_INTERVAL_NS` later: the real controller waits for its expectations (the
informer seeing its creations) and its client sends 20 requests/s, so 500 creations take
about 25 s. A Warning Event (``CreationsDeferred``, source ``timewarp-broker``) says so
once per owner, and the run's summary counts the pods never made (each owner's shortfall
when it last wanted pods: 0 once it caught up or wants fewer). So a valid but huge
``spec.replicas`` or ``parallelism`` (10^9) makes pods at a bounded rate while time moves,
instead of holding the run in one virtual instant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.controllers import events as k8s_events
from broker.controllers.base import ControllerState, KeyedController, Obj

BURST = 500  # burstReplicas / MaxPodCreateDeletePerSync
SLOW_START_INITIAL_BATCH = 1  # SlowStartInitialBatchSize
CLIENT_QPS = 20  # kube-controller-manager's --kube-api-qps default
BURST_INTERVAL_NS = BURST // CLIENT_QPS * 10**9
BACKOFF_BASE_NS = 5_000_000  # client-go's default controller rate limiter: 5 ms …
BACKOFF_MAX_NS = 1000 * 10**9  # … doubling, at most 1000 s
DEFERRED = "CreationsDeferred"  # reason of the Warning Event


def slow_start(count: int, create_one: Callable[[], str | None]) -> tuple[int, str | None]:
    """``slowStartBatch``: ``create_one`` (None, or the API's refusal) ``count`` times in
    batches of 1, 2, 4, …, stopping after a batch with a failure. Returns how many were
    made and the first error."""
    made, batch, remaining = 0, SLOW_START_INITIAL_BATCH, count
    while remaining > 0:
        size = min(batch, remaining)
        errors = [e for e in (create_one() for _ in range(size)) if e is not None]
        made += size - len(errors)
        if errors:
            return made, errors[0]
        remaining -= size
        batch *= 2
    return made, None


def create_in_bursts(
    controller: KeyedController[Any],
    state: ControllerState,
    owner: Obj,
    missing: int,
    create_one: Callable[[], str | None],
) -> tuple[int, str | None]:
    """Create up to ``missing`` pods for ``owner`` now — at most one burst per virtual
    instant, none before the next burst is due — and arrange the rest (a wake-up for the
    next burst, or the back-off after a failure). Returns how many were made and the
    first error."""
    meta = owner["metadata"]
    key = (meta["namespace"], meta["name"])
    now = controller.clock.now_ns()
    if state.next_burst_ns is not None and now < state.next_burst_ns:
        _defer(controller, state, owner, missing)
        return 0, None  # the wake-up for the next burst is set
    state.next_burst_ns = None
    count = min(missing, BURST)
    made, error = slow_start(count, create_one)
    if made:
        state.failures = 0
    if error is not None:
        delay = min(BACKOFF_BASE_NS * 2**state.failures, BACKOFF_MAX_NS)
        state.failures += 1
        controller.wake_at(state, key, now + delay)
    if error is None and missing > count:
        state.next_burst_ns = now + BURST_INTERVAL_NS
        controller.wake_at(state, key, state.next_burst_ns)
        _defer(controller, state, owner, missing - count)
    else:
        _defer(controller, state, owner, 0)
    return made, error


def no_creations_deferred(
    controller: KeyedController[Any], kind: str, namespace: str, name: str
) -> None:
    """The ``kind`` ``name`` has every pod it wants (it caught up, or wants fewer): nothing
    deferred any more. An owner that stops wanting pods while short (deleted, its service
    over, a failed Job) keeps its last count: the summary says what was never made."""
    controller.pods.defer_creations(kind, namespace, name, 0)


def _defer(
    controller: KeyedController[Any], state: ControllerState, owner: Obj, later: int
) -> None:
    """Say (once per owner, Warning Event) and count (the run's summary) that ``later``
    pods wait for later bursts; 0: none (any more)."""
    if later and not state.warned:
        state.warned = True
        k8s_events.emit(
            controller.store,
            owner,
            type_="Warning",
            reason=DEFERRED,
            message=(
                f"timewarp: {later} pods are still to create: the controller creates at most "
                f"{BURST} per burst, one burst every {BURST_INTERVAL_NS // 10**9} s of virtual "
                f"time (kube-controller-manager's burst at its client's {CLIENT_QPS} "
                "requests/s)"
            ),
            component="timewarp-broker",
        )
    meta = owner["metadata"]
    controller.pods.defer_creations(owner.get("kind", ""), meta["namespace"], meta["name"], later)
