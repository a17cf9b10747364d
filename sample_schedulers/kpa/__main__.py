"""``python -m sample_schedulers.kpa`` — a Knative-style autoscaler loop.

Every ``--tick`` seconds (2, Knative's) for each Deployment annotated
``autoscaling.knative.dev/class: kpa.autoscaling.knative.dev``: read its pods'
``concurrency`` from ``custom.metrics.k8s.io`` (``pods/*/concurrency``; timewarp's traffic
model publishes it, ``docs/services.md``), decide (``algorithm.py``), patch
``deployments/<name>/scale``, ``time.sleep``. Per-Deployment settings come from Knative's
annotations: ``autoscaling.knative.dev/target``, ``target-utilization-percentage``,
``window``, ``panic-window-percentage``, ``panic-threshold-percentage``, ``min-scale``,
``max-scale``.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

from sample_schedulers.common.cli import positive_float
from sample_schedulers.common.kube import load_config
from sample_schedulers.kpa.algorithm import TICK_S, Kpa, Settings

log = logging.getLogger("kpa")
PREFIX = "autoscaling.knative.dev/"
CLASS = "kpa.autoscaling.knative.dev"


def settings_of(annotations: dict[str, str], allow_zero: bool) -> Settings:
    def number(key: str, default: float) -> float:
        text = annotations.get(PREFIX + key)
        if text is None:
            return default
        try:
            return float(text.rstrip("s")) if key == "window" else float(text)
        except ValueError:
            log.warning("ignoring %s%s=%r (not a number)", PREFIX, key, text)
            return default

    base = Settings()
    return Settings(
        target=number("target", base.target),
        utilization_percent=number("target-utilization-percentage", base.utilization_percent),
        stable_window_s=number("window", base.stable_window_s),
        panic_window_percent=number("panic-window-percentage", base.panic_window_percent),
        panic_threshold_percent=number("panic-threshold-percentage", base.panic_threshold_percent),
        min_scale=int(number("min-scale", 0 if allow_zero else 1)),
        max_scale=int(number("max-scale", 0)),
    )


def selector_of(deployment) -> str:
    labels = deployment.spec.selector.match_labels or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def ready_pods(core: client.CoreV1Api, namespace: str, selector: str) -> int:
    count = 0
    for pod in core.list_namespaced_pod(namespace, label_selector=selector).items:
        if pod.metadata.deletion_timestamp is not None or pod.status.phase != "Running":
            continue
        if any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []):
            count += 1
    return count


def concurrency(custom: client.CustomObjectsApi, namespace: str, selector: str) -> float | None:
    listing = custom.list_namespaced_custom_object(
        "custom.metrics.k8s.io", "v1beta1", namespace, "pods/*/concurrency", label_selector=selector
    )
    items = listing.get("items", [])
    if not items:
        return None
    return sum(float(parse_quantity(item["value"])) for item in items)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sample_schedulers.kpa", description=__doc__)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--tick", type=positive_float, default=TICK_S, metavar="SECONDS")
    parser.add_argument(
        "--allow-zero", action="store_true", help="let min-scale default to 0 (needs an activator)"
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        load_config(args.kubeconfig)
    except Exception as exc:
        print(f"kpa: {exc}", file=sys.stderr)
        return 2
    api = client.ApiClient()
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    state: dict[tuple[str, str], Kpa] = {}
    try:
        while True:
            now = time.time()
            for dep in sorted(
                apps.list_deployment_for_all_namespaces().items,
                key=lambda d: (d.metadata.namespace, d.metadata.name),
            ):
                annotations = dep.metadata.annotations or {}
                if annotations.get(PREFIX + "class") != CLASS:
                    continue
                key = (dep.metadata.namespace, dep.metadata.name)
                kpa = state.get(key)
                if kpa is None:
                    kpa = state[key] = Kpa(settings_of(annotations, args.allow_zero))
                try:
                    selector = selector_of(dep)
                    observed = concurrency(custom, key[0], selector)
                    if observed is not None:
                        kpa.record(now, observed)
                    ready = ready_pods(core, key[0], selector)
                    desired = kpa.decide(now, ready)
                    current = dep.spec.replicas or 0
                    if desired is not None and desired != current:
                        apps.patch_namespaced_deployment_scale(
                            key[1], key[0], {"spec": {"replicas": desired}}
                        )
                        log.info(
                            "%s/%s: %d -> %d (concurrency %.1f, ready %d%s)", *key, current,
                            desired, observed or 0.0, ready, ", panic" if kpa.panicking else "",
                        )  # fmt: skip
                except ApiException as exc:
                    log.warning("%s/%s: %s %s", *key, exc.status, exc.reason)
            time.sleep(args.tick)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
