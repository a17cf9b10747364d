"""Discovery documents: ``/version``, ``/api``, ``/apis``, group and resource lists,
generated from the resource table so they always describe what is actually served."""

from __future__ import annotations

from typing import Any

from .resources import GLOBAL, Registry, ResourceType

SERVER_VERSION = {
    "major": "1",
    "minor": "30",
    "gitVersion": "v1.30.0-timewarp",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-04-17T00:00:00Z",
    "goVersion": "go1.22.2",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_SUB_VERBS = {
    "status": ("get", "patch", "update"),
    "scale": ("get", "patch", "update"),
    "binding": ("create",),
    "eviction": ("create",),
}
_SUB_KINDS = {
    "binding": ("Binding", "", "v1"),
    "eviction": ("Eviction", "policy", "v1"),
    "scale": ("Scale", "autoscaling", "v1"),
}


# kube-apiserver's "all" category (what `kubectl get all` lists)
_ALL = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "daemonsets.apps",
        "deployments.apps",
        "replicasets.apps",
        "statefulsets.apps",
        "horizontalpodautoscalers.autoscaling",
        "jobs.batch",
        "cronjobs.batch",
    }
)


def _resource(rt: ResourceType) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        doc["shortNames"] = list(rt.short_names)
    if rt.key in _ALL:
        doc["categories"] = ["all"]
    return doc


def resource_list(group: str, version: str, registry: Registry = GLOBAL) -> dict[str, Any] | None:
    types = registry.group_version(group, version)
    if types is None:
        return None
    resources = []
    for rt in types.values():
        resources.append(_resource(rt))
        for sub in rt.subresources:
            kind, sub_group, sub_version = _SUB_KINDS.get(sub, (rt.kind, "", ""))
            doc: dict[str, Any] = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": kind,
                "verbs": list(_SUB_VERBS[sub]),
            }
            if sub_group:
                doc["group"], doc["version"] = sub_group, sub_version
            resources.append(doc)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str, versions_of: list[str]) -> dict[str, Any]:
    versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions_of]
    return {"name": name, "versions": versions, "preferredVersion": versions[0]}


def api_group_list(registry: Registry = GLOBAL) -> dict[str, Any]:
    groups = [_group(g, vs) for g, vs in registry.groups().items()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(name: str, registry: Registry = GLOBAL) -> dict[str, Any] | None:
    versions = registry.groups().get(name)
    if versions is None:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def all_resource_types(registry: Registry = GLOBAL) -> tuple[ResourceType, ...]:
    return registry.served()
