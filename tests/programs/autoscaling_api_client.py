"""The scale subresource and autoscaling/v2 HPAs through the official client, the way an
autoscaler calls them. Run by tests/test_autoscaling_api.py with the newest client and
with 24.2.0 (``.venv/k8s24`` first on PYTHONPATH):

    python tests/programs/autoscaling_api_client.py KUBECONFIG

Every answer is deserialized by the client into its typed models; the checks that need
the client's view print one JSON report on stdout for the test to compare.
"""

from __future__ import annotations

import json
import sys

import kubernetes
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "default"


def status_of(call, *args, **kwargs) -> tuple[int, str]:
    try:
        call(*args, **kwargs)
    except ApiException as exc:
        body = exc.body.decode() if isinstance(exc.body, bytes) else exc.body
        return exc.status, json.loads(body)["message"]
    return 200, ""


def deployment(name: str, replicas: int) -> client.V1Deployment:
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="web", image="nginx:1.25")]
                ),
            ),
        ),
    )


def hpa_manifest(name: str) -> client.V2HorizontalPodAutoscaler:
    return client.V2HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V2HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V2CrossVersionObjectReference(
                api_version="apps/v1", kind="Deployment", name=name
            ),
            min_replicas=2,
            max_replicas=10,
            metrics=[
                client.V2MetricSpec(
                    type="Resource",
                    resource=client.V2ResourceMetricSource(
                        name="cpu",
                        target=client.V2MetricTarget(type="Utilization", average_utilization=60),
                    ),
                )
            ],
            behavior=client.V2HorizontalPodAutoscalerBehavior(
                scale_down=client.V2HPAScalingRules(stabilization_window_seconds=120)
            ),
        ),
    )


def main(kubeconfig: str) -> dict:
    config.load_kube_config(kubeconfig)
    apps = client.AppsV1Api()
    auto = client.AutoscalingV2Api()
    report: dict = {"version": kubernetes.__version__}

    created = apps.create_namespaced_deployment(NS, deployment("web", 1))
    assert isinstance(created, client.V1Deployment)
    scale = apps.read_namespaced_deployment_scale("web", NS)
    assert isinstance(scale, client.V1Scale)
    report["read"] = [scale.spec.replicas, scale.status.replicas, scale.status.selector]
    patched = apps.patch_namespaced_deployment_scale("web", NS, {"spec": {"replicas": 4}})
    report["patched"] = patched.spec.replicas
    report["generation"] = apps.read_namespaced_deployment("web", NS).metadata.generation
    patched.spec.replicas = 3
    replaced = apps.replace_namespaced_deployment_scale("web", NS, patched)
    report["replaced"] = replaced.spec.replicas
    patched.spec.replicas = 7  # patched's resourceVersion is stale now
    report["stale"] = status_of(apps.replace_namespaced_deployment_scale, "web", NS, patched)
    report["negative"] = status_of(
        apps.patch_namespaced_deployment_scale, "web", NS, {"spec": {"replicas": -1}}
    )
    report["missing"] = status_of(apps.read_namespaced_deployment_scale, "nope", NS)
    report["deployment_replicas"] = apps.read_namespaced_deployment("web", NS).spec.replicas

    rs = client.V1ReplicaSet(
        metadata=client.V1ObjectMeta(name="cache"),
        spec=client.V1ReplicaSetSpec(
            replicas=2,
            selector=client.V1LabelSelector(
                match_expressions=[
                    client.V1LabelSelectorRequirement(key="tier", operator="In", values=["b", "a"])
                ],
                match_labels={"app": "cache"},
            ),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "cache", "tier": "a"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="redis")]),
            ),
        ),
    )
    apps.create_namespaced_replica_set(NS, rs)
    rs_scale = apps.patch_namespaced_replica_set_scale("cache", NS, {"spec": {"replicas": 0}})
    report["rs_scale"] = [rs_scale.spec.replicas, rs_scale.status.selector]

    made = auto.create_namespaced_horizontal_pod_autoscaler(NS, hpa_manifest("web"))
    assert isinstance(made, client.V2HorizontalPodAutoscaler)
    behavior = made.spec.behavior
    report["hpa_defaults"] = {
        "scale_up_policies": [
            (p.type, p.value, p.period_seconds) for p in behavior.scale_up.policies
        ],
        "scale_up_window": behavior.scale_up.stabilization_window_seconds,
        "scale_down_window": behavior.scale_down.stabilization_window_seconds,
        "scale_down_select": behavior.scale_down.select_policy,
        "desired": made.status.desired_replicas,
    }
    bare = client.V2HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="bare"),
        spec=client.V2HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V2CrossVersionObjectReference(kind="Deployment", name="web"),
            max_replicas=3,
        ),
    )
    bare = auto.create_namespaced_horizontal_pod_autoscaler(NS, bare)
    metric = bare.spec.metrics[0]
    report["bare"] = [
        bare.spec.min_replicas,
        metric.type,
        metric.resource.name,
        metric.resource.target.average_utilization,
        bare.spec.behavior,
    ]

    # The autoscaler's own write: its status, through the status subresource.
    hpa = auto.read_namespaced_horizontal_pod_autoscaler("web", NS)
    hpa.status = client.V2HorizontalPodAutoscalerStatus(
        current_replicas=3,
        desired_replicas=5,
        current_metrics=[
            client.V2MetricStatus(
                type="Resource",
                resource=client.V2ResourceMetricStatus(
                    name="cpu",
                    current=client.V2MetricValueStatus(
                        average_utilization=90, average_value="450m"
                    ),
                ),
            )
        ],
        conditions=[
            client.V2HorizontalPodAutoscalerCondition(
                type="AbleToScale",
                status="True",
                reason="SucceededRescale",
                message="the HPA controller was able to update the target scale to 5",
            )
        ],
    )
    written = auto.replace_namespaced_horizontal_pod_autoscaler_status("web", NS, hpa)
    report["status"] = [
        written.status.desired_replicas,
        written.status.current_metrics[0].resource.current.average_value,
        written.status.conditions[0].reason,
    ]
    auto.patch_namespaced_horizontal_pod_autoscaler_status(
        "web", NS, {"status": {"desiredReplicas": 6}}
    )
    # A spec write keeps the status; a status write cannot change the spec.
    auto.patch_namespaced_horizontal_pod_autoscaler("web", NS, {"spec": {"maxReplicas": 12}})
    auto.patch_namespaced_horizontal_pod_autoscaler_status("web", NS, {"spec": {"maxReplicas": 99}})
    again = auto.read_namespaced_horizontal_pod_autoscaler("web", NS)
    report["after_writes"] = [again.spec.max_replicas, again.status.desired_replicas]
    listed = auto.list_namespaced_horizontal_pod_autoscaler(NS)
    report["listed"] = sorted(h.metadata.name for h in listed.items)
    stream = watch.Watch().stream(
        auto.list_namespaced_horizontal_pod_autoscaler,
        NS,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=1,
    )
    auto.delete_namespaced_horizontal_pod_autoscaler("bare", NS)
    for event in stream:
        assert isinstance(event["object"], client.V2HorizontalPodAutoscaler)
        report["watched"] = [event["type"], event["object"].metadata.name]
        break
    report["invalid"] = status_of(
        auto.patch_namespaced_horizontal_pod_autoscaler, "web", NS, {"spec": {"maxReplicas": 1}}
    )
    report["invalid_status"] = status_of(
        auto.patch_namespaced_horizontal_pod_autoscaler_status,
        "web",
        NS,
        {"status": {"desiredReplicas": -2}},
    )
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
