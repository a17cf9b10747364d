"""A pod's life on its node, with time in it: what the kubelet does between a binding and
Running, Running and Ready, a DELETE and the pod's removal — and the status it writes at
each step (``pkg/kubelet``: status manager, prober workers, image manager, pod killer).

**Start-up.** Once the kubelet model admits a pod (resources reserved on the node), its
containers start after the time it takes to pull the images the node does not have and to
start them. timewarp's workload extension says how long, as pod annotations (set on the
pod, on a template, or from a Batsim profile's ``"timewarp"`` keys of the same names in
camelCase, see ``docs/broker.md``):

- ``timewarp.io/image-pull-seconds``: pulling one image that is not on the node. Pulls on
  a node are serial (the kubelet's default ``serializeImagePulls: true``), an image pulled
  once stays (``imagePullPolicy`` ``IfNotPresent`` and ``Always`` alike: the layers are
  there), ``Never`` never pulls;
- ``timewarp.io/container-start-seconds``: creating and starting the containers once the
  images are there.

Until then the pod is Pending with ``PodReadyToStartContainers``/``Initialized`` True,
``Ready``/``ContainersReady`` False (``ContainersNotReady``) and its containers waiting
(``ContainerCreating``); Events ``Pulling``/``Pulled`` (or ``already present on
machine``), ``Created``, ``Started`` (source ``kubelet``).

**Readiness.** A container without probes is Ready when it starts. A ``startupProbe``
holds ``started`` (and readiness) back; a ``readinessProbe`` makes the container Ready at
its first probe at or after ``initialDelaySeconds`` (probes tick every ``periodSeconds``,
default 10, from the pod's admission, as the prober worker's ticker does; at start when
there is no initial delay) plus ``successThreshold − 1`` periods. Probes always succeed
(the simulated container is healthy).

**Termination.** A DELETE (or eviction) of a pod bound to a node and not finished is
graceful, as the API server makes it: ``metadata.deletionTimestamp`` = now + the grace
period (``DeleteOptions.gracePeriodSeconds``, else ``spec.terminationGracePeriodSeconds``,
default 30; 0 deletes at once), ``deletionGracePeriodSeconds``; the pod is Terminating
(still on its node, still using it, no longer counted by its ReplicaSet). The kubelet runs
the ``preStop`` hook (``lifecycle.preStop.sleep.seconds``; exec/HTTP hooks take no time),
signals the container, which exits ``timewarp.io/shutdown-seconds`` later (default 0: it
exits on the signal) with code 0 — or is killed (137) when the grace period ends first. A
container whose Batsim job ends meanwhile exits then. The kubelet writes the terminated
status (phase Succeeded or Failed) and the pod is removed. A pod whose containers have
not started yet exits at once.

With none of these (no annotations, no probes, default deletion) a pod starts, is Ready and
goes in the instant of its binding or deletion: Batkube's inputs give byte-identical
outputs.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from broker.controllers import events as k8s_events
from broker.facade.objects import format_time
from broker.facade.podstatus import set_addresses, set_condition
from broker.k8s import podutil
from broker.k8s.podutil import SERVE_UNTIL, annotation_seconds, serve_until_s  # noqa: F401

Obj = dict[str, Any]

IMAGE_PULL = "timewarp.io/image-pull-seconds"
CONTAINER_START = "timewarp.io/container-start-seconds"
SHUTDOWN = "timewarp.io/shutdown-seconds"
LIFECYCLE_ANNOTATIONS = (IMAGE_PULL, CONTAINER_START, SHUTDOWN)
# the same, as keys of a Batsim profile's (or job's) "timewarp" extension
PROFILE_KEYS = {
    "imagePullSeconds": IMAGE_PULL,
    "containerStartSeconds": CONTAINER_START,
    "shutdownSeconds": SHUTDOWN,
}
DEFAULT_GRACE_SECONDS = 30
DEFAULT_PROBE_PERIOD_SECONDS = 10
NS = 10**9


def seconds_annotation(pod: Obj, key: str) -> tuple[float, str]:
    """(seconds, problem): a lifecycle annotation's value, 0 when absent; a bad value is
    0 with a message saying why."""
    value, why = annotation_seconds(pod, key)
    return (value or 0.0), (f"{why}; taken as 0" if why else "")


def _containers(pod: Obj) -> list[Obj]:
    return [c for c in (pod.get("spec") or {}).get("containers") or () if isinstance(c, dict)]


def _probe(container: Obj, kind: str) -> Obj | None:
    probe = container.get(kind)
    return probe if isinstance(probe, dict) else None


def _int(probe: Obj, key: str, default: int) -> int:
    value = probe.get(key, default)
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default
    )


@dataclass
class StartPlan:
    """When a pod admitted at ``admitted_ns`` starts its containers and becomes Ready."""

    admitted_ns: int
    start_ns: int
    ready_ns: int  # >= start_ns
    started_ns: int  # startup probe passed (containers "started"); >= start_ns
    pulls: list[tuple[str, int, int]] = field(default_factory=list)  # (image, from, to)
    present: list[str] = field(default_factory=list)  # images already on the node
    problems: list[str] = field(default_factory=list)

    @property
    def immediate(self) -> bool:
        return self.ready_ns == self.admitted_ns


def _probe_pass_ns(probe: Obj, admitted: int, start: int, after: int) -> int:
    """When ``probe`` first succeeds ``successThreshold`` times in a row, probing from
    ``after`` on: ticks every ``periodSeconds`` from ``admitted`` (the worker's ticker),
    once at ``after`` itself (the kubelet's immediate trigger when a container starts or
    becomes started), a probe skipped while ``initialDelaySeconds`` (whole seconds since
    the container started) have not passed."""
    period = max(1, _int(probe, "periodSeconds", DEFAULT_PROBE_PERIOD_SECONDS)) * NS
    initial = _int(probe, "initialDelaySeconds", 0)
    successes = max(1, _int(probe, "successThreshold", 1))

    def allowed(t: int) -> bool:
        return (t - start) // NS >= initial

    if allowed(after):
        first = after
    else:
        # the first tick of the worker's ticker at or after the initial delay
        earliest = start + initial * NS
        k = max(0, -(-(earliest - admitted) // period))
        first = admitted + k * period
        while first < after or not allowed(first):
            first += period
    return first + (successes - 1) * period


class NodeImages:
    """The images on one node and its (serial) puller."""

    def __init__(self) -> None:
        self.present: dict[str, int] = {}  # image -> when it is there
        self.puller_free_ns = 0


def plan_start(pod: Obj, images: NodeImages, now_ns: int) -> StartPlan:
    """The start-up of ``pod`` admitted now on a node with ``images`` (which it updates)."""
    pull_s, problem_pull = seconds_annotation(pod, IMAGE_PULL)
    start_s, problem_start = seconds_annotation(pod, CONTAINER_START)
    plan = StartPlan(now_ns, now_ns, now_ns, now_ns)
    plan.problems = [p for p in (problem_pull, problem_start) if p]
    cursor = now_ns
    for c in _containers(pod):
        image = str(c.get("image") or "")
        if c.get("imagePullPolicy") == "Never":
            continue
        there = images.present.get(image)
        if there is not None:
            cursor = max(cursor, there)
            if there <= now_ns:
                plan.present.append(image)
            continue
        if pull_s <= 0:
            images.present[image] = now_ns
            plan.present.append(image)
            continue
        begin = max(cursor, images.puller_free_ns)
        end = begin + round(pull_s * NS)
        images.puller_free_ns = end
        images.present[image] = end
        plan.pulls.append((image, begin, end))
        cursor = end
    start = cursor + round(start_s * NS)
    plan.start_ns = plan.started_ns = plan.ready_ns = start
    for c in _containers(pod):
        started = start
        probe = _probe(c, "startupProbe")
        if probe is not None:
            started = _probe_pass_ns(probe, now_ns, start, start)
        ready = started
        probe = _probe(c, "readinessProbe")
        if probe is not None:
            ready = _probe_pass_ns(probe, now_ns, start, started)
        plan.started_ns = max(plan.started_ns, started)
        plan.ready_ns = max(plan.ready_ns, ready)
    return plan


def exit_delay_ns(pod: Obj, grace_s: int) -> tuple[int, bool]:
    """(ns from the DELETE to the container's exit, killed?): the preStop sleep, then the
    app's shutdown time after the signal, cut at the grace period (then SIGKILL)."""
    hook = 0.0
    for c in _containers(pod):
        sleep = (((c.get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}).get(
            "seconds"
        )
        if isinstance(sleep, int | float) and not isinstance(sleep, bool) and sleep > 0:
            hook = max(hook, float(sleep))
    shutdown, _ = seconds_annotation(pod, SHUTDOWN)
    wanted = round((hook + shutdown) * NS)
    grace = max(0, grace_s) * NS
    return (grace, True) if wanted > grace else (wanted, False)


def grace_seconds(pod: Obj, requested: int | None) -> int:
    """The grace period of a DELETE: the request's, else the pod's (default 30)."""
    if requested is not None:
        return max(0, requested)
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    return (
        value
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0
        else DEFAULT_GRACE_SECONDS
    )


# --------------------------------------------------------------------------- statuses


def _order(conditions: list[Obj]) -> list[Obj]:
    rank = {
        t: i
        for i, t in enumerate(
            ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        )
    }
    return sorted(conditions, key=lambda c: rank.get(c.get("type"), len(rank)))


def _container_status(pod: Obj, c: Obj, state: Obj, ready: bool, started: bool) -> Obj:
    uid = pod["metadata"].get("uid", "")
    return {
        "name": c["name"],
        "image": c.get("image", ""),
        "imageID": "",
        "containerID": f"timewarp://{uid}-{c['name']}",
        "ready": ready,
        "started": started,
        "restartCount": 0,
        "state": state,
        "lastState": {},
    }


def _not_ready(pod: Obj, now: str, names: list[str]) -> None:
    message = f"containers with unready status: [{' '.join(names)}]"
    for type_ in ("Ready", "ContainersReady"):
        set_condition(pod, type_, "False", now, "ContainersNotReady", message)


def admitted_status(pod: Obj, host_ip: str, now: str, pod_ip: str | None = None) -> None:
    """Admitted, containers not started yet (pulling images, creating containers); the
    sandbox, and so the pod's address, is there."""
    status = pod.setdefault("status", {})
    status.update(phase="Pending", startTime=now)
    set_addresses(status, host_ip, pod_ip)
    conditions = status.setdefault("conditions", [])
    for type_ in ("PodReadyToStartContainers", "Initialized"):
        set_condition(pod, type_, "True", now)
    containers = _containers(pod)
    _not_ready(pod, now, [c["name"] for c in containers])
    status["conditions"] = _order(conditions)
    status["containerStatuses"] = [
        _container_status(pod, c, {"waiting": {"reason": "ContainerCreating"}}, False, False)
        for c in containers
    ]


def started_status(
    pod: Obj, host_ip: str, now: str, ready: bool, started: bool, pod_ip: str | None = None
) -> None:
    """The containers run since ``now``; Ready at once unless a probe holds it back."""
    status = pod.setdefault("status", {})
    status.update(phase="Running")
    set_addresses(status, host_ip, pod_ip)
    status.setdefault("startTime", now)
    conditions = status.setdefault("conditions", [])
    for type_ in ("PodReadyToStartContainers", "Initialized"):
        set_condition(pod, type_, "True", now)
    containers = _containers(pod)
    status["containerStatuses"] = [
        _container_status(pod, c, {"running": {"startedAt": now}}, ready, started or ready)
        for c in containers
    ]
    if ready:
        for type_ in ("Ready", "ContainersReady"):
            set_condition(pod, type_, "True", now)
    else:
        _not_ready(pod, now, [c["name"] for c in containers])
    status["conditions"] = _order(conditions)


def ready_status(pod: Obj, now: str, ready: bool = True) -> None:
    """The startup probe passed (``started``), and, with ``ready``, readiness too."""
    status = pod.setdefault("status", {})
    for cs in status.get("containerStatuses") or ():
        cs["started"] = True
        cs["ready"] = ready
    if ready:
        conditions = status.setdefault("conditions", [])
        for type_ in ("Ready", "ContainersReady"):
            set_condition(pod, type_, "True", now)
        status["conditions"] = _order(conditions)


def exited_status(pod: Obj, now: str, killed: bool) -> None:
    """The containers of a deleted pod stopped: 0 when they exited on the signal, 137
    when the grace period ran out."""
    status = pod.setdefault("status", {})
    code = 137 if killed else 0
    status["phase"] = "Failed" if killed else "Succeeded"
    statuses = []
    for c in _containers(pod):
        old = next(
            (cs for cs in status.get("containerStatuses") or () if cs.get("name") == c["name"]),
            None,
        )
        started = ((old or {}).get("state") or {}).get("running", {}).get("startedAt")
        reason = "Completed" if not killed else "Error" if started else "ContainerStatusUnknown"
        entry = _container_status(pod, c, {}, False, False)
        entry["state"] = {
            "terminated": {
                "exitCode": code,
                "reason": reason,
                "startedAt": started or now,
                "finishedAt": now,
                "containerID": entry["containerID"],
            }
        }
        statuses.append(entry)
    status["containerStatuses"] = statuses
    conditions = status.setdefault("conditions", [])
    reason = "PodFailed" if killed else "PodCompleted"
    for type_ in ("Ready", "ContainersReady"):
        set_condition(pod, type_, "False", now, reason)
    status["conditions"] = _order(conditions)


class Timeline:
    """Due kubelet steps ("start", "started", "ready", "exit") of pods, in (time, order)
    order; a broker timer per instant wakes the driver, which applies the due ones while
    time stands still (:meth:`take_due`)."""

    def __init__(self, clock: Any) -> None:
        self._clock = clock
        self._seq = itertools.count()
        self._heap: list[tuple[int, int, str, str, str, str]] = []
        self._armed: set[int] = set()
        self._lock = threading.Lock()

    def add(self, at_ns: int, step: str, namespace: str, name: str, uid: str) -> None:
        with self._lock:
            heapq.heappush(self._heap, (at_ns, next(self._seq), step, namespace, name, uid))
            arm = at_ns not in self._armed
            self._armed.add(at_ns)
        if arm:
            self._clock.call_at(at_ns, lambda: None)  # Batsim is called back then

    def due(self, now_ns: int) -> bool:
        with self._lock:
            return bool(self._heap) and self._heap[0][0] <= now_ns

    def take_due(self, now_ns: int) -> list[tuple[str, str, str, str]]:
        """(step, namespace, name, uid) of every step due now, in order."""
        out = []
        with self._lock:
            while self._heap and self._heap[0][0] <= now_ns:
                at, _, step, namespace, name, uid = heapq.heappop(self._heap)
                self._armed.discard(at)
                out.append((step, namespace, name, uid))
        return out


class Kubelet:
    """The steps above for the simulated cluster (the host: ``broker.cluster.kubelet.KubeletModel``):
    admission with a start-up time, the due steps, graceful termination. Runs in the
    broker's driver thread (or a request's, under the cluster's state lock), like the
    rest of the kubelet model."""

    COMPONENT = "kubelet"

    def __init__(self, host: Any) -> None:
        self.host = host
        self.state = host.state  # the cluster's nodes, pods, clock
        self.store = host.store  # pods decoded as Go types (broker/controllers/typed.py)
        self.images: dict[str, NodeImages] = {}

    # --- start-up
    @staticmethod
    def has_timing(pod: Obj) -> bool:
        """Whether ``pod`` may take time to start (quick: most pods have nothing)."""
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if IMAGE_PULL in annotations or CONTAINER_START in annotations:
            return True
        return any(c.get("startupProbe") or c.get("readinessProbe") for c in _containers(pod))

    def admit(self, pod: Obj, jp: Any, node: Any) -> bool:
        """Take over a pod the kubelet admitted on ``node`` if its start takes time (then
        it is Pending, ContainerCreating, its steps scheduled); False: it starts now."""
        if not self.has_timing(pod):
            return False
        now = self.state.now_ns()
        plan = plan_start(pod, self.images.setdefault(node.name, NodeImages()), now)
        meta = pod["metadata"]
        for problem in plan.problems:
            self._event(pod, "Warning", "InvalidTiming", f"timewarp: {problem}")
        if plan.immediate:
            return False
        jp.state, jp.node, jp.plan = "starting", node.name, plan
        stamp = self.store.timestamp()
        self.store.update_status(
            "pods",
            meta["namespace"],
            meta["name"],
            lambda o: admitted_status(o, node.ip, stamp, jp.ip),
            copy=False,
        )
        for image in plan.present:
            self._event(
                pod, "Normal", "Pulled", f'Container image "{image}" already present on machine'
            )
        for image, _, _ in plan.pulls:
            self._event(pod, "Normal", "Pulling", f'Pulling image "{image}"')
        uid = meta["uid"]
        timeline = self.host.timeline
        timeline.add(plan.start_ns, "start", meta["namespace"], meta["name"], uid)
        if plan.started_ns > plan.start_ns and plan.ready_ns > plan.started_ns:
            timeline.add(plan.started_ns, "started", meta["namespace"], meta["name"], uid)
        if plan.ready_ns > plan.start_ns:
            timeline.add(plan.ready_ns, "ready", meta["namespace"], meta["name"], uid)
        return True

    def step(self, step: str, namespace: str, name: str, uid: str) -> None:
        """Apply a due step to the pod it was planned for (if it is still there)."""
        pod = self.store.get_or_none("pods", namespace, name)
        if pod is None or pod["metadata"].get("uid") != uid:
            return
        jp = self.state.pods.get((namespace, name))
        if step == "exit":
            self.exit(namespace, name, pod, killed=False)
            return
        if step == "exit-killed":
            self.exit(namespace, name, pod, killed=True)
            return
        if jp is None or jp.plan is None:
            return
        plan: StartPlan = jp.plan
        now = self.state.now_ns()
        stamp = self.store.timestamp()
        if step == "start" and jp.state == "starting":
            node = self.state.nodes[jp.node]
            for image, begin, end in plan.pulls:
                seconds = (end - begin) / NS
                waited = (end - plan.admitted_ns) / NS
                self._event(
                    pod, "Normal", "Pulled",
                    f'Successfully pulled image "{image}" in {seconds:g}s ({waited:g}s including waiting)',
                )  # fmt: skip
            for c in _containers(pod):
                self._event(pod, "Normal", "Created", f"Created container {c['name']}")
                self._event(pod, "Normal", "Started", f"Started container {c['name']}")
            ready, started = plan.ready_ns <= now, plan.started_ns <= now
            self.host.start_containers(
                namespace,
                name,
                pod,
                jp,
                node,
                lambda obj: started_status(obj, node.ip, stamp, ready, started, jp.ip),
            )
        elif step == "started" and jp.state == "running" and not podutil.is_terminating(pod):
            self.store.update_status(
                "pods", namespace, name, lambda o: ready_status(o, stamp, ready=False), copy=False
            )
        elif step == "ready" and jp.state == "running" and not podutil.is_terminating(pod):
            self.store.update_status(
                "pods", namespace, name, lambda o: ready_status(o, stamp), copy=False
            )

    # --- termination
    def mark_terminating(self, namespace: str, name: str, grace: int | None) -> Obj | None:
        """The API server's part of a graceful DELETE: ``deletionTimestamp`` = now +
        grace. None when the deletion is immediate (an unbound or finished pod, grace 0);
        a pod already Terminating keeps the earlier of its deadlines."""
        pod = self.store.get_or_none("pods", namespace, name)
        if pod is None or not (pod.get("spec") or {}).get("nodeName"):
            return None
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return None
        seconds = grace_seconds(pod, grace)
        if seconds == 0:
            return None
        deadline = self.store.now_epoch_ns() + seconds * NS
        stamp = format_time(deadline)
        existing = pod["metadata"].get("deletionTimestamp")
        if existing is not None and existing <= stamp:
            return pod

        def mark(obj: Obj) -> None:
            obj["metadata"]["deletionTimestamp"] = stamp
            obj["metadata"]["deletionGracePeriodSeconds"] = seconds

        return self.store.update_status("pods", namespace, name, mark)

    def terminate(self, namespace: str, name: str) -> None:
        """The kubelet's part: stop the containers of a pod marked Terminating — at once
        if they never started, else after preStop + shutdown, at most the grace period."""
        pod = self.store.get_or_none("pods", namespace, name)
        if pod is None or not podutil.is_terminating(pod):
            return
        jp = self.state.pods.get((namespace, name))
        grace = int(pod["metadata"].get("deletionGracePeriodSeconds") or 0)
        if jp is None or jp.state != "running":
            self.exit(namespace, name, pod, killed=False)
            return
        delay, killed = exit_delay_ns(pod, grace)
        for c in _containers(pod):
            self._event(pod, "Normal", "Killing", f"Stopping container {c['name']}")
        if delay == 0:
            self.exit(namespace, name, pod, killed=killed)
            return
        self.host.pod_terminating(namespace, name, pod)
        step = "exit-killed" if killed else "exit"
        self.host.timeline.add(
            self.state.now_ns() + delay, step, namespace, name, pod["metadata"]["uid"]
        )

    def exit(self, namespace: str, name: str, pod: Obj, *, killed: bool) -> None:
        """The containers stopped: the terminated status, then the pod is removed."""
        stamp = self.store.timestamp()
        self.store.update_status(
            "pods", namespace, name, lambda o: exited_status(o, stamp, killed), copy=False
        )
        self.store.delete("pods", namespace, name)
        self.host.removed_pod(namespace, name, pod)

    def _event(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        k8s_events.emit(
            self.store, pod, type_=type_, reason=reason, message=message, component=self.COMPONENT
        )
