"""Alibaba's GPU cluster trace (``clusterdata/cluster-trace-gpu-v2023``) → a platform
and a workload (``docs/simulator.md``, "Kubernetes workloads in").

The trace is two CSV files with a header line:

- the **pod list**: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos,
  pod_phase, creation_time, deletion_time, scheduled_time`` — times in seconds from the
  trace's start (empty or 0 deletion: still there at the end);
- the **node list**: ``sn, cpu_milli, memory_mib, num_gpu, model``.

A node becomes a host ``sn`` with allocatable ``cpu`` (``cpu_milli``), ``memory``
(``memory_mib`` Mi), ``nvidia.com/gpu`` (``num_gpu``) and the extended resource
``alibaba.com/gpu-milli`` = ``1000 × num_gpu`` (its GPUs in thousandths), and the label
``alibaba.com/gpu-model`` = ``model``. A pod becomes a job whose pod requests
``cpu_milli``m cpu, ``memory_mib``Mi memory and ``num_gpu × gpu_milli`` of
``alibaba.com/gpu-milli`` (GPU sharing: a pod on half a GPU asks for 500, two whole GPUs
2000; fractions of different GPUs of a node are not told apart); with one model in
``gpu_spec`` a ``nodeSelector`` on the model label (several models, ``A|B``, are left
unconstrained); ``qos`` as the label ``alibaba.com/qos``. It is submitted at
``creation_time`` and runs from ``scheduled_time`` (else its creation) to
``deletion_time`` (else the trace's last time).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.trace_select import WorkloadBuilder, clean, select, subtimes

GPU_MILLI = "alibaba.com/gpu-milli"
GPU_MODEL_LABEL = "alibaba.com/gpu-model"
QOS_LABEL = "alibaba.com/qos"
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "num_gpu")


class AlibabaError(ValueError):
    """A malformed trace file; the text names the file, line and column."""


def _rows(path: str | Path, needed: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    try:
        handle = open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise AlibabaError(f"{path}: cannot read ({exc.strerror})") from None
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise AlibabaError(
                f"{path}: line 1: missing column(s) {', '.join(missing)} "
                f"(the header has {', '.join(reader.fieldnames or []) or 'nothing'})"
            )
        return [(i + 2, row) for i, row in enumerate(reader)]


def _number(row: dict[str, str], column: str, where: str, default: float | None = None) -> float:
    text = (row.get(column) or "").strip()
    if not text or text.lower() == "nan":
        if default is None:
            raise AlibabaError(f"{where}: column {column} is empty")
        return default
    try:
        value = float(text)
    except ValueError:
        raise AlibabaError(f"{where}: column {column}: not a number: {text!r}") from None
    if value < 0:
        raise AlibabaError(f"{where}: column {column}: negative: {text!r}")
    return value


@dataclass(frozen=True)
class Pod:
    name: str
    cpu_milli: int
    memory_mib: int
    gpu_milli: int  # num_gpu × gpu_milli
    gpu_model: str | None
    qos: str | None
    created: float
    start: float
    end: float | None


def read_nodes(path: str | Path) -> list[tuple[str, dict[str, str]]]:
    nodes = []
    for line, row in _rows(path, NODE_COLUMNS):
        where = f"{path}:{line}"
        name = (row.get("sn") or "").strip()
        if not name:
            raise AlibabaError(f"{where}: column sn is empty")
        gpus = int(_number(row, "num_gpu", where, 0))
        alloc = [
            f"cpu={int(_number(row, 'cpu_milli', where))}m",
            f"memory={int(_number(row, 'memory_mib', where))}Mi",
        ]
        if gpus:
            alloc += [f"nvidia.com/gpu={gpus}", f"{GPU_MILLI}={1000 * gpus}"]
        props = {"allocatable": ",".join(alloc)}
        model = (row.get("model") or "").strip()
        if model and gpus:
            props["labels"] = f"{GPU_MODEL_LABEL}={model}"
        nodes.append((name, props))
    if not nodes:
        raise AlibabaError(f"{path}: no node")
    return nodes


def read_pods(path: str | Path) -> list[Pod]:
    pods = []
    for line, row in _rows(path, POD_COLUMNS):
        where = f"{path}:{line}"
        name = (row.get("name") or "").strip()
        if not name:
            raise AlibabaError(f"{where}: column name is empty")
        created = _number(row, "creation_time", where)
        scheduled = _number(row, "scheduled_time", where, 0.0)
        deleted = _number(row, "deletion_time", where, 0.0)
        spec = (row.get("gpu_spec") or "").strip()
        gpus = _number(row, "num_gpu", where, 0)
        pods.append(
            Pod(
                name=name,
                cpu_milli=int(_number(row, "cpu_milli", where)),
                memory_mib=int(_number(row, "memory_mib", where)),
                gpu_milli=int(gpus * _number(row, "gpu_milli", where, 0)),
                gpu_model=spec if spec and "|" not in spec else None,
                qos=(row.get("qos") or "").strip() or None,
                created=created,
                start=scheduled if scheduled > 0 else created,
                end=deleted if deleted > 0 else None,
            )
        )
    return pods


def _profile(pod: Pod, delay: float, scheduler: str) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": f"{pod.cpu_milli}m"}
    if pod.memory_mib:
        requests["memory"] = f"{pod.memory_mib}Mi"
    if pod.gpu_milli:
        requests[GPU_MILLI] = pod.gpu_milli
    profile: dict[str, Any] = {"type": "delay", "delay": clean(delay), "requests": requests}
    if pod.gpu_model and pod.gpu_milli:
        profile["nodeSelector"] = {GPU_MODEL_LABEL: pod.gpu_model}
    if pod.qos:
        profile["labels"] = {QOS_LABEL: pod.qos}
    profile["scheduler"] = scheduler
    return profile


def convert(
    pods: list[Pod],
    *,
    source: str,
    scheduler: str = "default-scheduler",
    window: tuple[float, float] | None = None,
    fraction: float = 1.0,
    scale: float = 1.0,
) -> dict[str, Any]:
    trace_end = max(max(p.created, p.start, p.end or 0) for p in pods) if pods else 0.0
    kept = select(
        pods,
        time_of=lambda p: p.created,
        name_of=lambda p: p.name,
        window=window,
        fraction=fraction,
    )
    if not kept:
        raise AlibabaError(f"{source}: no pod in the selection")
    built = WorkloadBuilder()
    for pod, subtime in zip(kept, subtimes([p.created for p in kept], scale), strict=True):
        delay = max(1.0, (pod.end if pod.end is not None else trace_end) - pod.start)
        built.add(_profile(pod, delay, scheduler), subtime, pod.name)
    return built.workload()
