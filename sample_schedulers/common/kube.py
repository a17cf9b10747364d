"""Talking to the API server the ordinary way: config loading and binding."""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client, config

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


def bind_pod(core: Any, namespace: str, pod_name: str, node_name: str) -> None:
    """Bind a pod to a node with ``CoreV1Api.create_namespaced_binding``.

    The server answers a binding with a ``Status``, which the client cannot deserialize
    as the declared ``V1Binding`` (old releases raise ValueError on the missing
    ``target``; pydantic releases a validation error). ``_preload_content=False`` skips
    deserialization; every release still raises ``ApiException`` on a non-2xx answer.
    """
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod_name, namespace=namespace),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node_name),
    )
    resp = core.create_namespaced_binding(namespace, body, _preload_content=False)
    # drain the raw response so its connection goes back to the pool
    getattr(resp, "data", None)
    release = getattr(resp, "release_conn", None)
    if release is not None:
        release()
