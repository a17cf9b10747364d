"""What a real API server stamps on every object (times, uids, generated names; what
each kind adds is its strategy's, ``kinds/``), and a Node as a kubelet registers it.

Pure functions over JSON dicts; the store calls them with its clock time and its seeded
random source, so the same sequence of requests yields the same uids and names.
"""

from __future__ import annotations

import functools
import random
from datetime import UTC, datetime
from typing import Any

# The API server's generateName alphabet (no vowels, no confusable digits).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

BUILTIN_PRIORITY_CLASSES = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}


def format_time(epoch_ns: int) -> str:
    """RFC 3339 with second precision, like ``metav1.Time``."""
    return _format_second(epoch_ns // 10**9)


@functools.lru_cache(maxsize=4096)  # every write stamps the time: many share their second
def _format_second(seconds: int) -> str:
    return _format_seconds(seconds)


@functools.lru_cache(maxsize=64)  # a run's writes fall on few days
def _format_day(day: int) -> str:
    return datetime.fromtimestamp(day * 86400, UTC).strftime("%Y-%m-%dT")


def _format_seconds(seconds: int, end: str = "Z") -> str:
    """``strftime("%Y-%m-%dT%H:%M:%S")`` of ``seconds`` (UTC) then ``end``: the date from
    a cache, the time of day by arithmetic (in a simulation most writes fall on a second
    of their own, so a cache of whole stamps missed; tests/test_store_trusted.py)."""
    day, second = divmod(seconds, 86400)
    hours, second = divmod(second, 3600)
    minutes, second = divmod(second, 60)
    return f"{_format_day(day)}{hours:02d}:{minutes:02d}:{second:02d}{end}"


def format_micro_time(epoch_ns: int) -> str:
    """RFC 3339 with microseconds, like ``metav1.MicroTime``."""
    seconds, rest = divmod(epoch_ns, 10**9)
    return _format_seconds(seconds, f".{rest // 1000:06d}Z")


# uuid.UUID(int=n, version=4): the variant bits 10 and the version nibble 4, set by hand
# (building the UUID object was most of a uid's cost; tests/test_store_trusted.py)
_UUID4_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_UUID4_SET = (0x8000 << 48) | (4 << 76)


def new_uid(rng: random.Random) -> str:
    """``str(uuid.UUID(int=rng.getrandbits(128), version=4))``, the same draw."""
    h = f"{rng.getrandbits(128) & _UUID4_CLEAR | _UUID4_SET:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def generated_name(prefix: str, rng: random.Random) -> str:
    return prefix + "".join(rng.choice(_SUFFIX_ALPHABET) for _ in range(5))


def make_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    address: str | None = None,
    heartbeat: str = "1970-01-01T00:00:00Z",
) -> dict[str, Any]:
    """A Ready node as a kubelet would register it, complete enough for every client
    version's typed ``V1Node`` (``nodeInfo`` fields are required by old clients)."""
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "timewarp-simulated",
        **(labels or {}),
    }
    resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status (simulated)",
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": heartbeat,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [condition],
            "addresses": [
                {"type": "InternalIP", "address": address or "10.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": "",
                "containerRuntimeVersion": "timewarp://0.1.0",
                "kernelVersion": "simulated",
                "kubeProxyVersion": "v1.30.0",
                "kubeletVersion": "v1.30.0",
                "machineID": "",
                "operatingSystem": "linux",
                "osImage": "timewarp simulated node",
                "systemUUID": "",
            },
            "phase": "Running",
        },
    }
