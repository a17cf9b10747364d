"""One HPA sync, the way kube-controller-manager's horizontal controller does it, through
the official client: read the HPA and its target's ``scale``, the pods the scale's
selector names and their metrics, decide (``algorithm.py``), patch ``scale``, write the
HPA's status, emit an Event on a rescale."""

from __future__ import annotations

import logging
import math
import time
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from kubernetes.utils import parse_quantity

from sample_schedulers.hpa import algorithm as alg

log = logging.getLogger("hpa")
SCALABLE = {  # apps kind -> (read scale, patch scale) on AppsV1Api; others: CustomObjectsApi
    "Deployment": ("read_namespaced_deployment_scale", "patch_namespaced_deployment_scale"),
    "ReplicaSet": ("read_namespaced_replica_set_scale", "patch_namespaced_replica_set_scale"),
    "StatefulSet": ("read_namespaced_stateful_set_scale", "patch_namespaced_stateful_set_scale"),
}


def _seconds(value: Any) -> float | None:
    """A timestamp as the client gives it (datetime, or an RFC 3339 string) → epoch s."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _window(text: str | None) -> float:
    """metrics.k8s.io's window ("15s", "1m0s", "30.5s") in seconds."""
    if not text:
        return 0.0
    total, number = 0.0, ""
    for ch in text:
        if ch.isdigit() or ch == ".":
            number += ch
        else:
            total += float(number or 0) * {"h": 3600, "m": 60, "s": 1}.get(ch, 0)
            number = ""
    return total


def pods_of(core: client.CoreV1Api, namespace: str, selector: str) -> list[alg.Pod]:
    pods = []
    for pod in core.list_namespaced_pod(namespace, label_selector=selector).items:
        status = pod.status
        ready = None
        changed = None
        for cond in status.conditions or []:
            if cond.type == "Ready":
                ready = cond.status == "True"
                changed = _seconds(cond.last_transition_time)
        requests: dict[str, float] = {}
        for c in pod.spec.containers:
            for res, qty in ((c.resources and c.resources.requests) or {}).items():
                requests[res] = requests.get(res, 0.0) + float(parse_quantity(qty))
        # a request missing from one container is missing for the pod (the controller's rule)
        for res in list(requests):
            if any(
                res not in ((c.resources and c.resources.requests) or {})
                for c in pod.spec.containers
            ):
                del requests[res]
        pods.append(
            alg.Pod(
                pod.metadata.name,
                status.phase or "Unknown",
                ready,
                changed,
                _seconds(status.start_time),
                pod.metadata.deletion_timestamp is not None,
                requests,
            )
        )
    return pods


def resource_metrics(
    custom: client.CustomObjectsApi, namespace: str, selector: str, resource: str
) -> dict[str, alg.Sample]:
    """metrics.k8s.io pod usage of ``resource``, summed over containers (the controller
    needs every container's sample)."""
    listing = custom.list_namespaced_custom_object(
        "metrics.k8s.io", "v1beta1", namespace, "pods", label_selector=selector
    )
    out = {}
    for item in listing.get("items", []):
        containers = item.get("containers") or []
        if not containers or any(resource not in (c.get("usage") or {}) for c in containers):
            continue
        value = sum(float(parse_quantity(c["usage"][resource])) for c in containers)
        out[item["metadata"]["name"]] = alg.Sample(
            value, _seconds(item.get("timestamp")) or 0.0, _window(item.get("window"))
        )
    return out


def pods_custom_metric(
    custom: client.CustomObjectsApi, namespace: str, selector: str, metric: str
) -> dict[str, alg.Sample]:
    """custom.metrics.k8s.io ``pods/*/<metric>`` (MetricValueList)."""
    listing = custom.list_namespaced_custom_object(
        "custom.metrics.k8s.io", "v1beta1", namespace, f"pods/*/{metric}", label_selector=selector
    )
    out = {}
    for item in listing.get("items", []):
        name = (item.get("describedObject") or {}).get("name")
        if name is None:
            continue
        seconds = item.get("windowSeconds")
        out[name] = alg.Sample(
            float(parse_quantity(item["value"])),
            _seconds(item.get("timestamp")) or 0.0,
            float(seconds) if seconds is not None else 0.0,
        )
    return out


class ScaleNotFound(Exception):
    """The scale target's kind has no ``scale`` subresource that discovery lists."""


def _apps(ref: dict) -> bool:
    """A target AppsV1Api scales (``apps/v1``, or no group given, as older HPAs wrote)."""
    api_version = ref.get("apiVersion") or ""
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    return ref.get("kind") in SCALABLE and group in ("", "apps", "extensions")


class HpaController:
    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.autoscaling = client.AutoscalingV2Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.memory: dict[tuple[str, str], alg.Normalizer] = {}
        self.targets: dict[tuple[str, str], tuple[str, str, str]] = {}  # discovery, once
        self.discovery: DynamicClient | None = None

    def sync_all(self) -> None:
        hpas = self.autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces()
        seen = set()
        for hpa in sorted(hpas.items, key=lambda h: (h.metadata.namespace, h.metadata.name)):
            key = (hpa.metadata.namespace, hpa.metadata.name)
            seen.add(key)
            try:
                self.sync(hpa)
            except ApiException as exc:
                log.warning("%s/%s: %s %s", *key, exc.status, exc.reason)
        for key in set(self.memory) - seen:
            del self.memory[key]

    def sync(self, hpa: Any) -> None:
        """One reconcile of one HPA (horizontal.go reconcileAutoscaler)."""
        now = time.time()
        ns, name = hpa.metadata.namespace, hpa.metadata.name
        spec = self.autoscaling.api_client.sanitize_for_serialization(hpa.spec)
        memory = self.memory.setdefault((ns, name), alg.Normalizer())
        ref = spec["scaleTargetRef"]
        conditions: list[tuple[str, str, str, str]] = []
        status = self.autoscaling.api_client.sanitize_for_serialization(hpa.status) or {}
        try:
            current, selector = self._read_scale(ref, ns)
        except ScaleNotFound as exc:
            conditions.append(("AbleToScale", "False", "FailedGetScale",
                               f"the HPA controller was unable to get the target's current scale: {exc}"))  # fmt: skip
            self._write_status(
                hpa,
                status,
                status.get("currentReplicas", 0),
                status.get("desiredReplicas", 0),
                status.get("currentMetrics"),
                conditions,
                None,
            )
            return
        conditions.append(
            (
                "AbleToScale",
                "True",
                "SucceededGetScale",
                "the HPA controller was able to get the target's current scale",
            )
        )
        min_r = spec.get("minReplicas", 1)
        max_r = spec["maxReplicas"]
        behavior = spec.get("behavior")
        metric_statuses = status.get("currentMetrics")
        reason = ""
        if current == 0 and min_r != 0:
            desired = 0
            conditions.append(
                (
                    "ScalingActive",
                    "False",
                    "ScalingDisabled",
                    "scaling is disabled since the replica count of the target is zero",
                )
            )
        elif current > max_r:
            desired, reason = max_r, "Current number of replicas above Spec.MaxReplicas"
        elif current < min_r:
            desired, reason = min_r, "Current number of replicas below Spec.MinReplicas"
        else:
            proposal, reason, metric_statuses, cond = self._compute(
                spec, ns, selector, current, now
            )
            conditions.append(cond)
            if proposal is None:  # no metric worked: keep the scale
                self._write_status(hpa, status, current, current, metric_statuses, conditions, None)
                return
            desired, limits = memory.normalize(behavior, current, proposal, min_r, max_r, now)
            conditions = [c for c in conditions if c[0] != "AbleToScale"] + limits
        rescale = desired != current
        last_scale = None
        if rescale:
            self._patch_scale(ref, ns, desired)
            memory.record_scale(behavior, current, desired, now)
            last_scale = now
            message = f"New size: {desired}; reason: {reason}"
            log.info("%s/%s: %s (was %d)", ns, name, message, current)
            conditions = [c for c in conditions if c[0] != "AbleToScale"]
            conditions.insert(
                0,
                (
                    "AbleToScale",
                    "True",
                    "SucceededRescale",
                    f"the HPA controller was able to update the target scale to {desired}",
                ),
            )
            self._event(hpa, "Normal", "SuccessfulRescale", message)
        self._write_status(hpa, status, current, desired, metric_statuses, conditions, last_scale)

    def _read_scale(self, ref: dict, ns: str) -> tuple[int, str | None]:
        """The target's ``scale`` (its ``spec.replicas``, else ``status.replicas``, and
        ``status.selector``): an apps kind through AppsV1Api, any other kind through its
        ``scale`` subresource, found by discovery (as the controller's scale client does)."""
        if _apps(ref):
            scale = getattr(self.apps, SCALABLE[ref["kind"]][0])(ref["name"], ns)
            spec, status = scale.spec.replicas, scale.status
            selector = status.selector if status else None
            observed = status.replicas if status else None
        else:
            group, version, plural = self._custom_target(ref)
            scale = self.custom.get_namespaced_custom_object_scale(
                group, version, ns, plural, ref["name"]
            )
            spec = (scale.get("spec") or {}).get("replicas")
            status = scale.get("status") or {}
            selector, observed = status.get("selector"), status.get("replicas")
        current = observed if observed is not None else 0
        return (spec if spec is not None else current), selector

    def _patch_scale(self, ref: dict, ns: str, replicas: int) -> None:
        body = {"spec": {"replicas": replicas}}
        if _apps(ref):
            getattr(self.apps, SCALABLE[ref["kind"]][1])(ref["name"], ns, body)
            return
        group, version, plural = self._custom_target(ref)
        self.custom.patch_namespaced_custom_object_scale(
            group, version, ns, plural, ref["name"], body
        )

    def _custom_target(self, ref: dict) -> tuple[str, str, str]:
        """(group, version, plural) of a scaleTargetRef outside apps: the kind's resource
        in its group version's discovery document, which must list ``<plural>/scale``."""
        api_version = ref.get("apiVersion") or ""
        if "/" not in api_version:
            raise ScaleNotFound(
                f'no scale subresource for kind "{ref.get("kind")}" in "{api_version}"'
            )
        key = (api_version, ref.get("kind"))
        if key not in self.targets:
            if self.discovery is None:  # only for such targets: apps ones need none
                self.discovery = DynamicClient(self.custom.api_client)
            try:
                resource = self.discovery.resources.get(api_version=api_version, kind=ref["kind"])
            except ResourceNotFoundError:
                resource = None
            if resource is None or "scale" not in resource.subresources:
                raise ScaleNotFound(
                    f'no scale subresource for kind "{ref.get("kind")}" in "{api_version}"'
                )
            group, version = api_version.split("/", 1)
            self.targets[key] = (group, version, resource.name)
        return self.targets[key]

    def _compute(
        self, spec: dict, ns: str, selector: str | None, current: int, now: float
    ) -> tuple[int | None, str, list[dict], tuple[str, str, str, str]]:
        """computeReplicasForMetrics: the largest proposal over the metrics; a scale-down
        is refused when some metric failed."""
        proposal: int | None = None
        reason = ""
        statuses: list[dict] = []
        failures: list[alg.MetricError] = []
        pods: list[alg.Pod] | None = None
        for metric in spec.get("metrics") or [_DEFAULT_CPU]:
            try:
                if selector is None:
                    raise alg.MetricError("InvalidSelector", "the scale target has no selector")
                if pods is None:
                    pods = pods_of(self.core, ns, selector)
                replicas, status, why = self._one(metric, ns, selector, pods, current, now)
            except alg.MetricError as exc:
                failures.append(exc)
                continue
            except ApiException as exc:
                failures.append(
                    alg.MetricError(
                        "FailedGetMetric", f"unable to get metrics: {exc.status} {exc.reason}"
                    )
                )
                continue
            statuses.append(status)
            if proposal is None or replicas > proposal:
                proposal, reason = replicas, why
        if proposal is None:
            err = failures[0] if failures else alg.MetricError("FailedGetMetric", "no metrics")
            return (
                None,
                "",
                statuses,
                (
                    "ScalingActive",
                    "False",
                    err.reason,
                    f"the HPA was unable to compute the replica count: {err}",
                ),
            )
        if failures and proposal < current:
            proposal = current  # invalid metrics and a scale-down: do not scale down
        return proposal, reason, statuses, ("ScalingActive", "True", "ValidMetricFound",
                                            f"the HPA was able to successfully calculate a replica count from {reason}")  # fmt: skip

    def _one(
        self, metric: dict, ns: str, selector: str, pods: list[alg.Pod], current: int, now: float
    ):
        kind = metric.get("type")
        if kind == "Resource":
            res = metric["resource"]
            name, target = res["name"], res["target"]
            samples = resource_metrics(self.custom, ns, selector, name)
            if target.get("type") == "Utilization":
                replicas, util, raw = alg.replicas_for_utilization(
                    current, float(target["averageUtilization"]), name, pods, samples, now
                )
                status = {"type": "Resource", "resource": {"name": name, "current": {
                    "averageUtilization": util, "averageValue": _quantity(raw, name)}}}  # fmt: skip
                return replicas, status, f"{name} resource utilization (percentage of request)"
            replicas, average = alg.replicas_for_average_value(
                current, float(parse_quantity(target["averageValue"])), pods, samples, now, name
            )
            status = {
                "type": "Resource",
                "resource": {"name": name, "current": {"averageValue": _quantity(average, name)}},
            }
            return replicas, status, f"{name} resource"
        if kind == "Pods":
            pm = metric["pods"]
            mname = pm["metric"]["name"]
            samples = pods_custom_metric(self.custom, ns, selector, mname)
            target = float(parse_quantity(pm["target"]["averageValue"]))
            replicas, average = alg.replicas_for_average_value(current, target, pods, samples, now)
            status = {
                "type": "Pods",
                "pods": {
                    "metric": {"name": mname},
                    "current": {"averageValue": _quantity(average, "")},
                },
            }
            return replicas, status, f"pods metric {mname}"
        raise alg.MetricError(
            "InvalidMetricSourceType", f"metric type {kind!r} is not supported by this sample"
        )

    def _write_status(
        self,
        hpa,
        old: dict,
        current: int,
        desired: int,
        metrics,
        conditions,
        last_scale: float | None,
    ) -> None:
        stamp = datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        before = {c.get("type"): c for c in old.get("conditions") or []}
        conds = []
        for type_, status_, reason, message in _dedupe(conditions):
            prev = before.get(type_)
            changed = prev is None or prev.get("status") != status_
            conds.append({"type": type_, "status": status_, "reason": reason, "message": message,
                          "lastTransitionTime": stamp if changed else prev.get("lastTransitionTime", stamp)})  # fmt: skip
        status = {
            "currentReplicas": current,
            "desiredReplicas": desired,
            "currentMetrics": metrics or None,
            "conditions": conds,
            "observedGeneration": hpa.metadata.generation,
        }
        if last_scale is not None:
            status["lastScaleTime"] = datetime.fromtimestamp(last_scale, UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            )
        elif old.get("lastScaleTime"):
            status["lastScaleTime"] = old["lastScaleTime"]
        comparable = {k: v for k, v in status.items()}
        old_cmp = {k: old.get(k) for k in status}
        if _strip_times(comparable) == _strip_times(old_cmp):
            return  # updateStatusIfNeeded: nothing changed
        self.autoscaling.patch_namespaced_horizontal_pod_autoscaler_status(
            hpa.metadata.name, hpa.metadata.namespace, {"status": status}
        )

    def _event(self, hpa, type_: str, reason: str, message: str) -> None:
        stamp = datetime.fromtimestamp(time.time(), UTC)
        body = client.CoreV1Event(
            metadata=client.V1ObjectMeta(
                generate_name=f"{hpa.metadata.name}.", namespace=hpa.metadata.namespace
            ),
            involved_object=client.V1ObjectReference(
                api_version="autoscaling/v2",
                kind="HorizontalPodAutoscaler",
                name=hpa.metadata.name,
                namespace=hpa.metadata.namespace,
                uid=hpa.metadata.uid,
            ),  # fmt: skip
            reason=reason,
            message=message,
            type=type_,
            source=client.V1EventSource(component="horizontal-pod-autoscaler"),
            first_timestamp=stamp,
            last_timestamp=stamp,
            count=1,
        )
        try:
            self.core.create_namespaced_event(hpa.metadata.namespace, body)
        except (ApiException, ValueError) as exc:  # an Event is a courtesy: never stop for it
            log.debug("event not written: %s", exc)


_DEFAULT_CPU = {  # the API server's default metric: 80 % cpu
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}


def _quantity(value: float, resource: str) -> str:
    if resource == "memory":
        return str(int(value))
    return f"{math.ceil(value * 1000)}m"


def _dedupe(conditions):
    seen: dict[str, tuple] = {}
    for cond in conditions:
        seen[cond[0]] = cond
    order = ["AbleToScale", "ScalingActive", "ScalingLimited"]
    return [seen[t] for t in order if t in seen]


def _strip_times(status: dict) -> dict:
    out = dict(status)
    out["conditions"] = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in status.get("conditions") or []
    ]
    return out
