"""Writes snapshot.json.gz: what `kubectl get nodes,pods,deployments,hpa -A -o json` prints for
a made-up cluster of 50 nodes (46 workers, 3 GPU nodes tainted for GPU work, 1 control
plane) and 1,000 pods (a Deployment `web` with an HPA, a Deployment `api`, CoreDNS,
kube-proxy on every node, and batch Job pods created over six hours: finished, running and
a few pending). Seeded: the same script writes the same bytes (tests/test_cluster_import.py
checks the committed file is this script's); gzipped, as `... -o json | gzip` would be
(`timewarp workload from-cluster` reads either).

    python examples/inputs/cluster_snapshot/generate.py
"""

from __future__ import annotations

import gzip
import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

NOW = datetime(2026, 11, 20, 12, 0, 0, tzinfo=UTC)
rng = random.Random(31)


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def uid() -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def meta(name: str, namespace: str | None, created: datetime, **extra) -> dict:
    out = {"creationTimestamp": stamp(created), "name": name}
    if namespace:
        out["namespace"] = namespace
    out["resourceVersion"] = str(rng.randrange(10**5, 10**7))
    out["uid"] = uid()
    out.update(extra)
    return out


DEFAULT_TOLERATIONS = [
    {
        "effect": "NoExecute",
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "tolerationSeconds": 300,
    },
    {
        "effect": "NoExecute",
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "tolerationSeconds": 300,
    },
]


def node(
    name: str, cpu: str, memory: str, labels: dict, taints: list | None = None, gpus: int = 0
) -> dict:
    alloc = {"cpu": cpu, "ephemeral-storage": "95551679124", "memory": memory, "pods": "110"}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        **labels,
    }
    spec = {"podCIDR": f"10.244.{rng.randrange(256)}.0/24"}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta(name, None, NOW - timedelta(days=30), labels=labels),
        "spec": spec,
        "status": {
            "allocatable": alloc,
            "capacity": dict(alloc),
            "conditions": [
                {
                    "lastTransitionTime": stamp(NOW - timedelta(days=30)),
                    "status": "True",
                    "type": "Ready",
                }
            ],
        },
    }


def container(
    name: str, image: str, cpu: str, memory: str, gpus: int = 0, limit_cpu: str | None = None
) -> dict:
    resources: dict = {"requests": {"cpu": cpu, "memory": memory}}
    limits = {}
    if limit_cpu:
        limits["cpu"] = limit_cpu
        limits["memory"] = memory
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        limits["nvidia.com/gpu"] = str(gpus)
    if limits:
        resources["limits"] = limits
    return {
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "name": name,
        "resources": resources,
        "terminationMessagePolicy": "File",
    }


def pod(
    name: str,
    namespace: str,
    created: datetime,
    containers: list,
    *,
    labels: dict,
    owner: tuple[str, str] | None,
    node_name: str | None,
    phase: str,
    started: datetime | None,
    finished: datetime | None,
    extra_spec: dict | None = None,
) -> dict:
    extra = {"labels": labels}
    if owner:
        extra["ownerReferences"] = [
            {
                "apiVersion": "apps/v1" if owner[0] != "Job" else "batch/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": owner[0],
                "name": owner[1],
                "uid": uid(),
            }
        ]
    spec = {
        "containers": containers,
        "restartPolicy": "Never" if owner and owner[0] == "Job" else "Always",
        "schedulerName": "default-scheduler",
        "tolerations": list(DEFAULT_TOLERATIONS),
    }
    if node_name:
        spec["nodeName"] = node_name
    spec.update(extra_spec or {})
    status: dict = {"phase": phase, "qosClass": "Burstable"}
    if started:
        status["startTime"] = stamp(started)
        states = []
        for c in containers:
            if finished:
                state = {
                    "terminated": {
                        "exitCode": 0,
                        "finishedAt": stamp(finished),
                        "reason": "Completed",
                        "startedAt": stamp(started),
                    }
                }
            else:
                state = {"running": {"startedAt": stamp(started)}}
            states.append(
                {
                    "image": c["image"],
                    "name": c["name"],
                    "ready": finished is None,
                    "restartCount": 0,
                    "started": finished is None,
                    "state": state,
                }
            )
        status["containerStatuses"] = states
    else:
        status["conditions"] = [
            {
                "lastTransitionTime": stamp(created),
                "message": "0/50 nodes are available: 50 Insufficient cpu.",
                "reason": "Unschedulable",
                "status": "False",
                "type": "PodScheduled",
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta(name, namespace, created, **extra),
        "spec": spec,
        "status": status,
    }


def suffix(n: int) -> str:
    return "".join(rng.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))


def deployment(name: str, namespace: str, replicas: int, cont: dict, created: datetime) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(name, namespace, created, generation=3, labels=labels),
        "spec": {
            "progressDeadlineSeconds": 600,
            "replicas": replicas,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": labels},
            "strategy": {
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
                "type": "RollingUpdate",
            },
            "template": {
                "metadata": {"creationTimestamp": None, "labels": labels},
                "spec": {
                    "containers": [cont],
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                },
            },
        },
        "status": {
            "availableReplicas": replicas,
            "readyReplicas": replicas,
            "replicas": replicas,
            "updatedReplicas": replicas,
        },
    }


def main() -> None:
    nodes = [
        node(
            "control-plane-0",
            "4",
            "16163416Ki",
            {"node-role.kubernetes.io/control-plane": ""},
            [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}],
        )
    ]
    for i in range(46):
        zone = "abc"[i % 3]
        nodes.append(
            node(
                f"worker-{i:02d}",
                "8" if i < 30 else "16",
                "32827380Ki" if i < 30 else "65799544Ki",
                {
                    "topology.kubernetes.io/zone": f"eu-west-1{zone}",
                    "node.kubernetes.io/instance-type": "m5.2xlarge" if i < 30 else "m5.4xlarge",
                },
            )
        )
    for i in range(3):
        nodes.append(
            node(
                f"gpu-{i}",
                "32",
                "131841128Ki",
                {"accelerator": "nvidia-a100", "topology.kubernetes.io/zone": "eu-west-1a"},
                [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}],
                gpus=4,
            )
        )
    names = [n["metadata"]["name"] for n in nodes]
    workers = [n for n in names if n.startswith("worker")]
    items: list[dict] = list(nodes)
    pods: list[dict] = []
    boot = NOW - timedelta(days=30)
    for name in names:  # kube-proxy, a DaemonSet's
        pods.append(
            pod(
                f"kube-proxy-{suffix(5)}",
                "kube-system",
                boot,
                [container("kube-proxy", "registry.k8s.io/kube-proxy:v1.30.4", "100m", "64Mi")],
                labels={"k8s-app": "kube-proxy"},
                owner=("DaemonSet", "kube-proxy"),
                node_name=name,
                phase="Running",
                started=boot,
                finished=None,
            )
        )
    deploys = [
        (
            "web",
            "shop",
            6,
            container("web", "ghcr.io/example/web:2.4.1", "500m", "512Mi", limit_cpu="1"),
        ),
        (
            "api",
            "shop",
            4,
            container("api", "ghcr.io/example/api:1.9.0", "1", "1Gi", limit_cpu="2"),
        ),
        (
            "coredns",
            "kube-system",
            2,
            container("coredns", "registry.k8s.io/coredns/coredns:v1.11.1", "100m", "70Mi"),
        ),
    ]
    for name, ns, replicas, cont in deploys:
        created = NOW - timedelta(days=rng.randrange(2, 20))
        items.append(deployment(name, ns, replicas, cont, created))
        rs = f"{name}-{suffix(10)}"
        for _ in range(replicas):
            pods.append(
                pod(
                    f"{rs}-{suffix(5)}",
                    ns,
                    created + timedelta(seconds=5),
                    [cont],
                    labels={"app": name, "pod-template-hash": rs.rsplit("-", 1)[1]},
                    owner=("ReplicaSet", rs),
                    node_name=rng.choice(workers),
                    phase="Running",
                    started=created + timedelta(seconds=9),
                    finished=None,
                )
            )
    batch = 1000 - len(pods)
    for i in range(batch):
        # arrivals over the six hours before the snapshot, busier in its second half
        offset = 6 * 3600 * (rng.random() ** 0.7)
        created = NOW - timedelta(seconds=6 * 3600) + timedelta(seconds=int(offset))
        job = f"etl-{i // 4:03d}" if i % 10 else f"train-{i // 10:03d}"
        gpu = job.startswith("train") and i % 20 == 0
        cpu = rng.choice(["250m", "500m", "1", "2", "4"]) if not gpu else "8"
        memory = rng.choice(["256Mi", "1Gi", "2Gi", "4Gi"]) if not gpu else "32Gi"
        lifetime = max(30, int(rng.expovariate(1 / 1200)))
        started = created + timedelta(seconds=rng.randrange(1, 20))
        extra_spec = None
        node_name = rng.choice(workers)
        if gpu:
            extra_spec = {
                "nodeSelector": {"accelerator": "nvidia-a100"},
                "tolerations": [
                    *DEFAULT_TOLERATIONS,
                    {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
                ],
            }
            node_name = f"gpu-{rng.randrange(3)}"
        if created > NOW - timedelta(minutes=3) and i % 3 == 0:
            phase, started, finished, node_name = "Pending", None, None, None
        elif started + timedelta(seconds=lifetime) < NOW:
            phase, finished = "Succeeded", started + timedelta(seconds=lifetime)
        else:
            phase, finished = "Running", None
        name = f"{job}-{suffix(5)}"
        pods.append(
            pod(
                name,
                "batch",
                created,
                [
                    container(
                        "main",
                        f"ghcr.io/example/{job.split('-')[0]}:1",
                        cpu,
                        memory,
                        gpus=1 if gpu else 0,
                    )
                ],
                labels={"job-name": job, "batch.kubernetes.io/job-name": job},
                owner=("Job", job),
                node_name=node_name,
                phase=phase,
                started=started,
                finished=finished,
                extra_spec=extra_spec,
            )
        )
    items += pods
    items.append(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": meta("web", "shop", NOW - timedelta(days=10)),
            "spec": {
                "maxReplicas": 20,
                "minReplicas": 2,
                "metrics": [
                    {
                        "resource": {
                            "name": "cpu",
                            "target": {"averageUtilization": 60, "type": "Utilization"},
                        },
                        "type": "Resource",
                    }
                ],
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            },
            "status": {
                "currentMetrics": [
                    {
                        "resource": {
                            "current": {"averageUtilization": 70, "averageValue": "350m"},
                            "name": "cpu",
                        },
                        "type": "Resource",
                    }
                ],
                "currentReplicas": 6,
                "desiredReplicas": 7,
                "lastScaleTime": stamp(NOW - timedelta(minutes=42)),
            },
        }
    )
    dump = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    # gzip with no name and time in its header: the same bytes on every run
    text = (json.dumps(dump, indent=4) + "\n").encode()
    Path(__file__).with_name("snapshot.json.gz").write_bytes(gzip.compress(text, mtime=0))


if __name__ == "__main__":
    main()
