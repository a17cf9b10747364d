"""The batch/v1 Job controller: pods to completion, in virtual time.

For each Job (created through the API), like kube-controller-manager's job controller:

- it creates pods from ``spec.template`` (``generateName: <job>-``, the template's labels —
  admission added ``batch.kubernetes.io/controller-uid``, ``controller-uid``,
  ``batch.kubernetes.io/job-name``, ``job-name`` — and an ``ownerReferences`` entry with
  ``controller: true``), keeping ``min(parallelism, completions - succeeded)`` pods active;
- a pod that ends ``Succeeded`` counts as a completion; one that ends ``Failed`` (its
  container failed, its own ``activeDeadlineSeconds`` passed, the kubelet refused it) or
  is deleted or evicted before it ended counts as a failure, and is replaced after the
  real controller's back-off: 10 s after the first failure, doubling, at most 360 s;
- the Job ends ``Complete`` (reason ``CompletionsReached``, ``completionTime`` set) when
  ``completions`` pods succeeded, and ``Failed`` when failures exceed ``backoffLimit``
  (``BackoffLimitExceeded``) or it ran longer than ``activeDeadlineSeconds`` from its
  ``startTime`` (``DeadlineExceeded``, a virtual-time timer); active pods are then deleted;
- ``status`` carries ``startTime``, ``active``/``succeeded``/``failed`` (absent when 0, as
  the real server's ``omitempty`` does), ``ready``, ``uncountedTerminatedPods`` and the
  conditions; Normal/Warning Events (``SuccessfulCreate``, ``SuccessfulDelete``,
  ``Completed``, ``BackoffLimitExceeded``, ``DeadlineExceeded``) go with them;
- pods are created in bursts (:mod:`broker.controllers.bursts`: slow-start batches, at most
  500 a round, the next burst 25 s of virtual time later); one the API refuses is a Warning
  ``FailedCreate``, retried after the work queue's back-off, and a Job whose last round
  failed with none of its pods left does not keep an otherwise finished simulation going.

How long a pod runs is not Kubernetes' business: the cluster turns each pod into a Batsim
job when its template carries ``timewarp.io/duration`` (see ``broker.cluster.dynamic_jobs``).

Honest limits: ``completionMode: Indexed``, ``podFailurePolicy``, ``successPolicy``,
``backoffLimitPerIndex`` and ``podReplacementPolicy`` are not implemented (Indexed Jobs run
as NonIndexed); ``restartPolicy: OnFailure`` behaves like ``Never`` (a failed pod is
replaced, not restarted in place); deleting a Job orphans its pods (the API's default for
batch/v1 Jobs; ``propagationPolicy`` is ignored); ``suspend`` stops creating pods and
deletes active ones without counting them as failed (condition ``Suspended``; ``startTime``
restarts on resume, as in Kubernetes), and a suspended Job does not keep the simulation
going; orphan pods matching a Job's selector are not adopted (the controller follows the
pods it made); ``ttlSecondsAfterFinished`` is ignored (finished Jobs stay).

Threading: the store listener only records which Jobs changed; :meth:`reconcile` runs in
the broker's driver thread, Jobs in sorted order, so runs are reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.controllers import bursts
from broker.controllers import events as k8s_events
from broker.controllers.base import ControllerState, KeyedController, PodOps
from broker.controllers.ownership import pod_from_template
from broker.facade.errors import ApiError
from broker.facade.objects import format_time
from broker.facade.store import Store

COMPONENT = "job-controller"
BACKOFF_BASE_S = 10
BACKOFF_MAX_S = 360
_TERMINAL = ("Succeeded", "Failed")


@dataclass
class _JobState(ControllerState):
    start_ns: int | None = None
    succeeded: int = 0
    failed: int = 0
    last_failure_ns: int | None = None
    active: dict[str, dict[str, Any]] = field(default_factory=dict)  # its pods, last seen
    finished: bool = False
    simulated: bool = False  # its pods are Batsim jobs: it keeps the simulation going


def owner_job(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The controlling Job owner reference of ``pod``, if any."""
    for ref in pod.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("kind") == "Job" and ref.get("controller"):
            return ref
    return None


def _condition(status: dict[str, Any], type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True" for c in status.get("conditions") or ()
    )


def _set_condition(
    conditions: list[dict[str, Any]], type_: str, status: str, reason: str, message: str, stamp: str
) -> None:
    """Replace (or add) the condition ``type_``, as the real controller updates one."""
    conditions[:] = [c for c in conditions if c.get("type") != type_]
    conditions.append(
        {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastProbeTime": stamp,
            "lastTransitionTime": stamp,
        }
    )


def is_finished(job: dict[str, Any]) -> bool:
    status = job.get("status") or {}
    return _condition(status, "Complete") or _condition(status, "Failed")


class JobController(KeyedController[_JobState]):
    """batch/v1 Jobs (see the module docstring); started at SIMULATION_BEGINS."""

    watches = ("jobs.batch",)
    listens = ("jobs.batch", "pods")
    owns = ("jobs.batch",)
    state_type = _JobState

    def __init__(self, store: Store, clock: Any, pods: PodOps) -> None:
        super().__init__(store, clock, pods)
        self._changed: dict[tuple[str, str], set[str]] = {}  # Job -> its pods that changed
        self._pending_changes: dict[tuple[str, str], set[str]] = {}  # being reconciled

    # ------------------------------------------------------------ change tracking
    def _on_change(self, key: str, _event: str, obj: dict[str, Any]) -> None:
        """Store listener (store lock held): remember which Jobs to look at."""
        if key == "jobs.batch":
            meta = obj["metadata"]
            self.mark(meta.get("namespace", ""), meta["name"])
        elif key == "pods":
            ref = owner_job(obj)
            if ref is not None:
                meta = obj["metadata"]
                self.mark(meta.get("namespace", ""), ref.get("name", ""), meta["name"])

    def mark(self, namespace: str, name: str, pod: str | None = None) -> None:
        """Look at this Job in the next :meth:`reconcile`; ``pod``, its pod that changed."""
        with self._lock:
            self._dirty.add((namespace, name))
            if pod is not None:
                self._changed.setdefault((namespace, name), set()).add(pod)

    def keeps_simulation_alive(self, now_ns: int) -> bool:
        """Some Job may still create pods that become Batsim jobs (or is not looked at
        yet): the broker must not tell Batsim that registration is finished. Not a Job
        whose pods the API refuses (its last round failed, none of its pods is left): it
        retries after the back-off, but would keep an otherwise finished run going for
        ever."""
        if self.has_work():
            return True
        return any(
            s.simulated and not s.finished and not (s.failures and not s.active)
            for s in self._states.values()
        )

    # ------------------------------------------------------------ reconciliation
    def reconcile(self) -> bool:
        """Bring every changed Job to its wanted state. Returns whether anything was
        written (pods created or deleted, a status changed)."""
        with self._lock:
            dirty, self._dirty = sorted(self._dirty), set()
            self._pending_changes, self._changed = self._changed, {}
        did = False
        for namespace, name in dirty:
            if self._reconcile(namespace, name):
                did = True
        return did

    def _reconcile(self, namespace: str, name: str) -> bool:
        """One Job, in the real controller's order: its state (forgotten when the Job
        was deleted or re-created), its start time and deadline, its pods counted, its
        verdict (deadline, backoff limit, completions), then the action — terminate,
        suspend, or scale to parallelism — and the status; a finished Job's event."""
        key = (namespace, name)
        job = self.store.get_or_none("jobs.batch", namespace, name)
        state = self._state_for(key, job)
        if state is None:
            return False
        spec = job["spec"]
        now = self.clock.now_ns()
        suspended = bool(spec.get("suspend"))
        state.simulated = not suspended and self.pods.simulates(spec["template"])
        self._track_start(state, key, spec, suspended, now)
        active = self._count(state, job, self._pending_changes.get(key, set()), now)
        verdict = self._verdict(state, spec, active, now)
        if verdict is not None and verdict[0] == "Complete":
            bursts.no_creations_deferred(self, "Job", *key)  # every pod it wanted was made
        if verdict is not None:
            self._terminate(state, job, active, failed=verdict[0] == "Failed")
            did = True  # the verdict itself is a change (status, event)
            active = []
        elif suspended:
            did = self._terminate(state, job, active, failed=False)
            active = []
        else:
            did = self._scale_to_parallelism(state, key, job, active, now)
        if self._write_status(job, state, active, verdict, suspended, now):
            did = True
        if verdict is not None:
            self._finish(state, job, verdict)
        return did

    def _state_for(self, key: tuple[str, str], job: dict[str, Any] | None) -> _JobState | None:
        """The controller's memory of a live, unfinished Job (None otherwise). A Job
        deleted, or deleted and re-created under the same name, is forgotten: its
        timers are cancelled and its pods are orphaned."""
        if job is None:
            self.forget(key)
            return None
        state = self.state_for(key, job["metadata"]["uid"])
        if state.finished or is_finished(job):
            state.finished = True
            return None
        return state

    def _track_start(
        self,
        state: _JobState,
        key: tuple[str, str],
        spec: dict[str, Any],
        suspended: bool,
        now: int,
    ) -> None:
        """startTime begins when the Job is first not suspended, and restarts (with its
        activeDeadlineSeconds timer) on each resume."""
        if suspended and state.start_ns is not None:
            state.start_ns = None
            state.timers.cancel()
        if state.start_ns is None and not suspended:
            state.start_ns = now
            deadline = spec.get("activeDeadlineSeconds")
            if deadline is not None:
                self.wake_at(state, key, now + int(deadline) * 10**9)

    def _verdict(
        self, state: _JobState, spec: dict[str, Any], active: list[dict[str, Any]], now: int
    ) -> tuple[str, str, str] | None:
        """(condition, reason, message) when the Job is over, in the controller's order
        of precedence: deadline, backoff limit, completions."""
        deadline = spec.get("activeDeadlineSeconds")
        completions = spec.get("completions")
        if (
            deadline is not None
            and state.start_ns is not None
            and now >= state.start_ns + int(deadline) * 10**9
        ):
            return ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
        if state.failed > int(spec.get("backoffLimit", 6)):
            return ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        if (completions is not None and state.succeeded >= completions) or (
            completions is None and state.succeeded > 0 and not active
        ):
            return ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
        return None

    def _terminate(
        self, state: _JobState, job: dict[str, Any], active: list[dict[str, Any]], *, failed: bool
    ) -> bool:
        """Delete every active pod: on a Failed verdict each counts as failed, on
        completion or suspension not."""
        for pod in active:
            if failed:
                state.failed += 1
            self._delete(state, job, pod)
        return bool(active)

    def _scale_to_parallelism(
        self,
        state: _JobState,
        key: tuple[str, str],
        job: dict[str, Any],
        active: list[dict[str, Any]],
        now: int,
    ) -> bool:
        """Create the missing pods (after the failure back-off) or delete the newest
        surplus ones (parallelism lowered); ``active`` is updated in place."""
        spec = job["spec"]
        completions = spec.get("completions")
        if completions is None:
            want = 0 if state.succeeded > 0 else int(spec.get("parallelism", 1))
        else:
            want = min(int(spec.get("parallelism", 1)), completions - state.succeeded)
        missing = want - len(active)
        if missing > 0:
            ready_ns = self._backoff_until(state)
            if ready_ns > now:
                self.wake_at(state, key, ready_ns)
                return False
            made, _ = bursts.create_in_bursts(
                self, state, job, missing, lambda: self._create_one(state, job, active)
            )
            return made > 0
        bursts.no_creations_deferred(self, "Job", *key)
        if missing < 0:
            newest = sorted(
                active, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"])
            )
            for pod in newest[missing:]:
                self._delete(state, job, pod)
                active.remove(pod)
            return True
        return False

    def _finish(self, state: _JobState, job: dict[str, Any], verdict: tuple[str, str, str]) -> None:
        """The Job is over: no more timers, and the event the real controller records."""
        state.finished = True
        state.timers.cancel()
        complete = verdict[0] == "Complete"
        reason, message = ("Completed", "Job completed") if complete else verdict[1:]
        k8s_events.emit(
            self.store,
            job,
            type_="Normal" if complete else "Warning",
            reason=reason,
            message=message,
            component=COMPONENT,
        )

    def _count(
        self, state: _JobState, job: dict[str, Any], changed: set[str], now: int
    ) -> list[dict[str, Any]]:
        """Count the Job's pods that ended since the last look (a pod gone before it ended
        is a failure); return the active ones (pending or running), by name.

        Only pods this controller made and that changed since (the store listener says
        which) are read again: O(changes) per reconcile. A real controller also adopts
        orphans that match its selector; this one does not."""
        namespace, uid = job["metadata"]["namespace"], job["metadata"]["uid"]
        for name in sorted(changed & state.active.keys()):
            pod = self.store.get_or_none("pods", namespace, name)
            if pod is not None and (owner_job(pod) or {}).get("uid") != uid:
                pod = None  # the name was reused by someone else: ours is gone
            phase = None if pod is None else (pod.get("status") or {}).get("phase")
            if pod is not None and phase not in _TERMINAL:
                state.active[name] = pod
                continue
            del state.active[name]
            if phase == "Succeeded":
                state.succeeded += 1
            else:  # Failed, or deleted/evicted before it ended
                state.failed += 1
                state.last_failure_ns = now
        return [state.active[name] for name in sorted(state.active)]

    def _backoff_until(self, state: _JobState) -> int:
        if state.failed == 0 or state.last_failure_ns is None:
            return 0
        delay_s = min(BACKOFF_BASE_S * 2 ** (state.failed - 1), BACKOFF_MAX_S)
        return state.last_failure_ns + delay_s * 10**9

    def _create_one(
        self, state: _JobState, job: dict[str, Any], active: list[dict[str, Any]]
    ) -> str | None:
        """One pod from the template, added to ``active``; the error's message if the
        API refused it (a Warning Event ``FailedCreate``, as the real controller's)."""
        meta = job["metadata"]
        pod = pod_from_template(
            job["spec"]["template"], f"{meta['name'][:58]}-", meta["namespace"], job
        )
        try:
            created = self.pods.create_controlled_pod(pod)
        except ApiError as exc:
            self._event(job, "Warning", "FailedCreate", f"Error creating: {exc.message}")
            return exc.message
        state.active[created["metadata"]["name"]] = created
        active.append(created)
        self._event(
            job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
        )
        return None

    def _event(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        k8s_events.emit(
            self.store, job, type_=type_, reason=reason, message=message, component=COMPONENT
        )

    def _delete(self, state: _JobState, job: dict[str, Any], pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        state.active.pop(name, None)  # not to be counted: the caller decides
        self.pods.delete_controlled_pod(pod["metadata"]["namespace"], name)
        k8s_events.emit(
            self.store,
            job,
            type_="Normal",
            reason="SuccessfulDelete",
            message=f"Deleted pod: {name}",
            component=COMPONENT,
        )

    def _write_status(
        self,
        job: dict[str, Any],
        state: _JobState,
        active: list[dict[str, Any]],
        verdict: tuple[str, str, str] | None,
        suspended: bool,
        now: int,
    ) -> bool:
        epoch = self.clock.wall_epoch_ns()
        stamp = format_time(epoch + now)
        ready = sum(
            1
            for pod in active
            if _condition(pod.get("status") or {}, "Ready")
            and (pod.get("status") or {}).get("phase") == "Running"
        )

        def mutate(obj: dict[str, Any]) -> None:
            status = obj.setdefault("status", {})
            for key, value in (
                ("active", len(active)),
                ("succeeded", state.succeeded),
                ("failed", state.failed),
            ):
                if value:
                    status[key] = value
                else:
                    status.pop(key, None)
            status["ready"] = ready
            status["uncountedTerminatedPods"] = {}
            if state.start_ns is not None:
                status["startTime"] = format_time(epoch + state.start_ns)
            conditions = status.setdefault("conditions", [])
            was = next((c for c in conditions if c.get("type") == "Suspended"), None)
            if suspended and (was is None or was["status"] != "True"):
                _set_condition(
                    conditions, "Suspended", "True", "JobSuspended", "Job suspended", stamp
                )
            elif not suspended and was is not None and was["status"] == "True":
                _set_condition(conditions, "Suspended", "False", "JobResumed", "Job resumed", stamp)
            if verdict is not None:
                conditions.append(
                    {
                        "type": verdict[0],
                        "status": "True",
                        "reason": verdict[1],
                        "message": verdict[2],
                        "lastProbeTime": stamp,
                        "lastTransitionTime": stamp,
                    }
                )
                if verdict[0] == "Complete":
                    status["completionTime"] = stamp
            if not conditions:
                del status["conditions"]

        meta = job["metadata"]
        before = meta["resourceVersion"]
        after = self.store.update("jobs.batch", meta["namespace"], meta["name"], mutate)
        return after["metadata"]["resourceVersion"] != before
