"""A small operator written the ordinary way against the official client: it creates a
Deployment (and an HPA object for it), then every 15 s reads the Deployment and its scale
and follows a fixed plan through the scale subresource — 1 replica, 3 from t=30 s, 1 from
t=90 s, a new image at t=120 s — printing one JSON line of what it saw per round.

    python tests/programs/scaling_operator.py --until 200 [--start-delay 5]

The Deployment's pods serve until ``--until`` (timewarp.io/serve-until) and take
``--start-delay`` seconds to start (timewarp.io/container-start-seconds); they are
scheduled by another process (``schedulerName: default``).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime

import kubernetes
from kubernetes import client, config
from kubernetes.client.rest import ApiException

NS = "default"
PLAN = [(0, 1), (30, 3), (90, 1)]  # (from second, replicas)


def manifest(until: float, start_delay: float, image: str) -> dict:
    labels = {"app": "web"}
    annotations = {"timewarp.io/serve-until": str(until)}
    if start_delay:
        annotations["timewarp.io/container-start-seconds"] = str(start_delay)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": {
                    "schedulerName": "default",
                    "containers": [
                        {
                            "name": "web",
                            "image": image,
                            "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}},
                        }
                    ],
                },
            },
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--until", type=float, required=True)
    parser.add_argument("--start-delay", type=float, default=0)
    args = parser.parse_args()
    config.load_kube_config()
    apps = client.AppsV1Api()
    auto = client.AutoscalingV2Api()
    print(json.dumps({"client": kubernetes.__version__}), flush=True)
    apps.create_namespaced_deployment(NS, manifest(args.until, args.start_delay, "shop/web:1"))
    auto.create_namespaced_horizontal_pod_autoscaler(
        NS,
        client.V2HorizontalPodAutoscaler(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V2HorizontalPodAutoscalerSpec(
                scale_target_ref=client.V2CrossVersionObjectReference(
                    api_version="apps/v1", kind="Deployment", name="web"
                ),
                min_replicas=1,
                max_replicas=5,
            ),
        ),
    )
    started = time.time()
    rolled = False
    while True:
        elapsed = time.time() - started
        wanted = [r for t, r in PLAN if elapsed >= t][-1]
        scale = apps.read_namespaced_deployment_scale("web", NS)
        if scale.spec.replicas != wanted:
            scale = apps.patch_namespaced_deployment_scale(
                "web", NS, {"spec": {"replicas": wanted}}
            )
        if elapsed >= 120 and not rolled:
            patch = {
                "spec": {
                    "template": {"spec": {"containers": [{"name": "web", "image": "shop/web:2"}]}}
                }
            }
            apps.patch_namespaced_deployment("web", NS, patch)
            rolled = True
        d = apps.read_namespaced_deployment("web", NS)
        status = d.status
        hpa = auto.read_namespaced_horizontal_pod_autoscaler("web", NS)
        hpa.status = client.V2HorizontalPodAutoscalerStatus(
            current_replicas=status.replicas or 0,
            desired_replicas=wanted,
            last_scale_time=datetime.now(UTC),
        )
        try:
            auto.replace_namespaced_horizontal_pod_autoscaler_status("web", NS, hpa)
        except ApiException as exc:  # a concurrent write: the next round writes again
            if exc.status != 409:
                raise
        conditions = sorted((c.type, c.status, c.reason) for c in status.conditions or ())
        print(
            json.dumps(
                {
                    "t": round(elapsed, 3),
                    "scale": [scale.spec.replicas, scale.status.replicas, scale.status.selector],
                    "replicas": status.replicas,
                    "ready": status.ready_replicas,
                    "available": status.available_replicas,
                    "updated": status.updated_replicas,
                    "generation": [d.metadata.generation, status.observed_generation],
                    "revision": (d.metadata.annotations or {}).get(
                        "deployment.kubernetes.io/revision"
                    ),
                    "conditions": conditions,
                }
            ),
            flush=True,
        )
        time.sleep(15)


if __name__ == "__main__":
    main()
