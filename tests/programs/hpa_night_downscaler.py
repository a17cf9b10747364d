"""A night-time downscaler as people write them (kube-downscaler's HPA handling): every
minute, list the cluster's HorizontalPodAutoscalers through autoscaling/v1 with the
official client, and at night (22:00-06:00 UTC) lower each one's minReplicas to 1,
keeping the original in an annotation; restore it in the morning. The object is written
back whole (a PUT), as read.

    python hpa_night_downscaler.py            (in a pod: the service account)
"""

import datetime
import time

from kubernetes import client, config

ORIGINAL = "downscaler/original-min-replicas"
NIGHT_MIN = 1


def is_night(now: datetime.datetime) -> bool:
    return now.hour >= 22 or now.hour < 6


def main() -> None:
    config.load_incluster_config()
    api = client.AutoscalingV1Api()
    while True:
        now = datetime.datetime.now(datetime.UTC)
        for hpa in api.list_horizontal_pod_autoscaler_for_all_namespaces().items:
            meta, spec = hpa.metadata, hpa.spec
            notes = meta.annotations or {}
            where = f"{meta.namespace}/{meta.name}"
            if is_night(now) and ORIGINAL not in notes and (spec.min_replicas or 1) > NIGHT_MIN:
                notes[ORIGINAL] = str(spec.min_replicas or 1)
                spec.min_replicas = NIGHT_MIN
            elif not is_night(now) and ORIGINAL in notes:
                spec.min_replicas = int(notes.pop(ORIGINAL))
            else:
                continue
            meta.annotations = notes
            api.replace_namespaced_horizontal_pod_autoscaler(meta.name, meta.namespace, hpa)
            print(f"{now:%H:%M} {where}: minReplicas {spec.min_replicas}", flush=True)
        time.sleep(60)


if __name__ == "__main__":
    main()
