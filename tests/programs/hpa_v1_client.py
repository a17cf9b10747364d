"""autoscaling/v1 HorizontalPodAutoscalers through the official client, beside v2: one
stored object, written and read in both versions. Run by tests/test_hpa_v1.py with the
newest client and with 24.2.0 (``.venv/k8s24`` first on PYTHONPATH):

    python tests/programs/hpa_v1_client.py KUBECONFIG

Every answer goes through the client's typed models (V1HorizontalPodAutoscaler,
V2HorizontalPodAutoscaler); one JSON report on stdout for the test to compare.
"""

from __future__ import annotations

import json
import sys

import kubernetes
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "default"
METRICS = "autoscaling.alpha.kubernetes.io/metrics"


def v1_hpa(name: str, cpu: int | None) -> client.V1HorizontalPodAutoscaler:
    return client.V1HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name=name, labels={"team": "a"}),
        spec=client.V1HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V1CrossVersionObjectReference(
                api_version="apps/v1", kind="Deployment", name=name
            ),
            min_replicas=2,
            max_replicas=10,
            target_cpu_utilization_percentage=cpu,
        ),
    )


def main() -> None:
    config.load_kube_config(sys.argv[1])
    v1 = client.AutoscalingV1Api()
    v2 = client.AutoscalingV2Api()
    out: dict = {"version": kubernetes.__version__}

    made = v1.create_namespaced_horizontal_pod_autoscaler(NS, v1_hpa("web", 60))
    out["created"] = [made.api_version, made.spec.target_cpu_utilization_percentage]
    seen = v2.read_namespaced_horizontal_pod_autoscaler("web", NS)
    metric = seen.spec.metrics[0]
    out["as_v2"] = [
        seen.api_version,
        seen.spec.min_replicas,
        metric.type,
        metric.resource.name,
        metric.resource.target.type,
        metric.resource.target.average_utilization,
    ]
    # v2 adds a memory metric and a behavior; v1 carries them in annotations
    seen.spec.metrics.append(
        client.V2MetricSpec(
            type="Resource",
            resource=client.V2ResourceMetricSource(
                name="memory",
                target=client.V2MetricTarget(type="AverageValue", average_value="512Mi"),
            ),
        )
    )
    seen.spec.behavior = client.V2HorizontalPodAutoscalerBehavior(
        scale_down=client.V2HPAScalingRules(stabilization_window_seconds=120)
    )
    v2.replace_namespaced_horizontal_pod_autoscaler("web", NS, seen)
    back = v1.read_namespaced_horizontal_pod_autoscaler("web", NS)
    notes = back.metadata.annotations or {}
    out["v1_view"] = [
        back.spec.target_cpu_utilization_percentage,
        json.loads(notes[METRICS]),
        sorted(notes),
    ]
    # a v1 client writes it back (min lowered): nothing v2 had is lost
    back.spec.min_replicas = 1
    v1.replace_namespaced_horizontal_pod_autoscaler("web", NS, back)
    v1.patch_namespaced_horizontal_pod_autoscaler("web", NS, {"spec": {"maxReplicas": 12}})
    again = v2.read_namespaced_horizontal_pod_autoscaler("web", NS)
    out["after_v1_writes"] = [
        again.spec.min_replicas,
        again.spec.max_replicas,
        [(m.resource.name, m.resource.target.type) for m in again.spec.metrics],
        again.spec.behavior.scale_down.stabilization_window_seconds,
        again.metadata.annotations,
    ]
    # the status, written in v1, read in v2 and back
    status = v1.read_namespaced_horizontal_pod_autoscaler_status("web", NS)
    status.status = client.V1HorizontalPodAutoscalerStatus(
        current_replicas=3, desired_replicas=4, current_cpu_utilization_percentage=75
    )
    v1.replace_namespaced_horizontal_pod_autoscaler_status("web", NS, status)
    st = v2.read_namespaced_horizontal_pod_autoscaler("web", NS).status
    out["status_v2"] = [
        st.current_replicas,
        st.desired_replicas,
        [
            (m.type, m.resource.name, m.resource.current.average_utilization)
            for m in st.current_metrics
        ],
    ]
    st1 = v1.read_namespaced_horizontal_pod_autoscaler("web", NS).status
    out["status_v1"] = [
        st1.current_replicas,
        st1.desired_replicas,
        st1.current_cpu_utilization_percentage,
    ]

    # no CPU target in v1: the 80 % default, made explicit in v2
    v1.create_namespaced_horizontal_pod_autoscaler(NS, v1_hpa("bare", None))
    bare = v2.read_namespaced_horizontal_pod_autoscaler("bare", NS).spec.metrics[0].resource
    out["bare"] = [bare.name, bare.target.average_utilization]
    listed = v1.list_namespaced_horizontal_pod_autoscaler(NS, label_selector="team=a")
    out["listed"] = [listed.api_version, [(h.metadata.name, h.api_version) for h in listed.items]]
    everywhere = v1.list_horizontal_pod_autoscaler_for_all_namespaces()
    out["everywhere"] = [h.metadata.name for h in everywhere.items]

    w = watch.Watch()
    events = []
    stream = w.stream(
        v1.list_namespaced_horizontal_pod_autoscaler,
        NS,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    )
    v2.delete_namespaced_horizontal_pod_autoscaler("bare", NS)
    for event in stream:
        obj = event["object"]
        events.append([event["type"], type(obj).__name__, obj.api_version, obj.metadata.name])
        w.stop()
    out["watched"] = events

    try:
        v1.create_namespaced_horizontal_pod_autoscaler(NS, v1_hpa("neg", -5))
    except ApiException as exc:
        out["invalid"] = [exc.status, json.loads(exc.body)["message"]]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
