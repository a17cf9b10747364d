"""Talking to the API server the ordinary way: config loading, binding, and a pod
list-then-watch loop for schedulers that keep their own pod cache."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)


def load_config(kubeconfig: str | None = None) -> str:
    """``config.load_kube_config()`` (``$KUBECONFIG`` or ``~/.kube/config``, or the given
    file), falling back to ``config.load_incluster_config()``. Returns which was used.

    Raises ``config.ConfigException`` naming both attempts when neither works.
    """
    try:
        config.load_kube_config(config_file=kubeconfig)
        return "kubeconfig"
    except (config.ConfigException, FileNotFoundError) as kube_err:
        if kubeconfig:
            raise config.ConfigException(f"kubeconfig {kubeconfig}: {kube_err}") from kube_err
        try:
            config.load_incluster_config()
            return "in-cluster"
        except config.ConfigException as cluster_err:
            raise config.ConfigException(
                f"no usable kubeconfig ({kube_err}) and not in a cluster ({cluster_err})"
            ) from cluster_err


def bind_pod(
    core: Any,
    namespace: str,
    pod_name: str,
    node_name: str,
    *,
    annotations: Mapping[str, str] | None = None,
) -> None:
    """Bind a pod to a node with ``CoreV1Api.create_namespaced_binding``. ``annotations``
    go on the binding's metadata (the API server copies them to the pod).

    The server answers a binding with a ``Status``, which the client cannot deserialize
    as the declared ``V1Binding`` (old releases raise ValueError on the missing
    ``target``; pydantic releases a validation error). ``_preload_content=False`` skips
    deserialization; every release still raises ``ApiException`` on a non-2xx answer.
    """
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(
            name=pod_name,
            namespace=namespace,
            annotations=dict(annotations) if annotations is not None else None,
        ),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node_name),
    )
    resp = core.create_namespaced_binding(namespace, body, _preload_content=False)
    # drain the raw response so its connection goes back to the pool
    getattr(resp, "data", None)
    release = getattr(resp, "release_conn", None)
    if release is not None:
        release()


def watch_pods(
    core: Any,
    *,
    resource_version: Callable[[], str | None],
    on_event: Callable[[str, Any], None],
    resync: Callable[[], None],
    react: Callable[[], None],
    stop: threading.Event,
    log: logging.Logger,
    watch_timeout: int = 300,
    retry_delay: float = 1.0,
    watch_factory: Callable[[], Any] = watch.Watch,
) -> None:
    """Watch all pods until ``stop`` is set, for a caller that listed them already.

    Each watch request starts from ``resource_version()`` (the caller tracks it from
    its list and from every event it handles). Every event goes to ``on_event(type,
    V1Pod)``, then ``react()`` runs. A ``410 Gone`` answer calls ``resync()`` (list
    again) and ``react()``; any other API error, or an unreachable server, is logged
    and retried after ``retry_delay`` seconds (an early ``stop`` cuts the wait).
    ``stop`` is checked between events, so the last event before it is still handled.

    Limits: unlike ``WatchScheduler``'s informers, the pods are not re-listed after an
    arbitrary failure, and an exception from a callback ends the loop unless it is one
    of the kinds retried above.
    """
    while not stop.is_set():
        stream = watch_factory()
        try:
            for event in stream.stream(
                core.list_pod_for_all_namespaces,
                resource_version=resource_version(),
                timeout_seconds=watch_timeout,
            ):
                on_event(event["type"], event["object"])
                react()
                if stop.is_set():
                    stream.stop()
                    break
        except ApiException as exc:
            if exc.status == 410:
                log.info("watch expired (410 Gone); listing pods again")
                resync()
                react()
            else:
                log.warning("watch failed: %s %s; retrying", exc.status, exc.reason)
                stop.wait(retry_delay)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("API unreachable (%s); retrying", exc)
            stop.wait(retry_delay)
