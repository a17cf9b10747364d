"""A pod watch loop with exponential backoff, as written against a real cluster."""

from __future__ import annotations

import logging
import random
import time
from datetime import datetime, timezone

from kubernetes import client, config, watch

log = logging.getLogger(__name__)


def watch_pending(namespace: str = "default", budget_s: float = 300.0) -> None:
    config.load_kube_config()
    v1 = client.CoreV1Api()
    deadline = time.monotonic() + budget_s
    backoff = 0.5
    while time.monotonic() < deadline:
        started = datetime.now(timezone.utc)
        try:
            for event in watch.Watch().stream(v1.list_namespaced_pod, namespace, timeout_seconds=30):
                pod = event["object"]
                if pod.status.phase == "Pending":  # only unscheduled pods
                    log.info("%s pending since %s", pod.metadata.name, started.isoformat())
            backoff = 0.5
        except client.ApiException as exc:
            log.warning("watch failed (%s); retrying in %.1fs", exc.status, backoff)
            time.sleep(backoff + random.random() / 10)
            backoff = min(backoff * 2, 30.0)
