"""Seeded workload and platform generators.

Every generator is a pure function of its arguments (``random.Random(seed)``), so the same
command line gives the same bytes. Workloads follow Batkube's convention (one pod per job:
``res`` 1, ``delay`` profiles with ``cpu``/``memory``/``scheduler``); the mixed generator
adds timewarp's per-node-class durations (KubCG-style CPU/GPU images).
"""

from __future__ import annotations

import random
from typing import Any
from xml.sax.saxutils import quoteattr

# the schedulerName a real API server gives a pod that names none: what the sample
# schedulers serve by default (Batkube's own workloads say "default")
DEFAULT_SCHEDULER = "default-scheduler"


def _job(
    index: int,
    subtime: float,
    profile: str,
    walltime: float | None,
    replicaset: str | None = None,
    groups: int = 1,
) -> dict[str, Any]:
    """Job ``index`` (1-based); with ``replicaset`` its pod is owned by that ReplicaSet, or
    with ``groups`` > 1 by ``<replicaset>-<(index - 1) mod groups>`` (round robin)."""
    job: dict[str, Any] = {"id": str(index), "subtime": _clean(subtime), "res": 1}
    if walltime is not None:
        job["walltime"] = _clean(walltime)
    job["profile"] = profile
    if replicaset:
        job["replicaset"] = replicaset if groups == 1 else f"{replicaset}-{(index - 1) % groups}"
    return job


def _clean(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 6)


def _pod_profile(delay: float, cpu: str, memory: str | None, scheduler: str) -> dict[str, Any]:
    profile: dict[str, Any] = {"type": "delay", "delay": _clean(delay), "cpu": cpu}
    if memory:
        profile["memory"] = memory
    profile["scheduler"] = scheduler
    return profile


def spaced(
    count: int,
    delay: float,
    interval: float,
    *,
    cpu: str = "1",
    memory: str | None = None,
    scheduler: str = DEFAULT_SCHEDULER,
    walltime: float | None = 1000,
    start: float = 0.0,
    replicaset: str | None = None,
    groups: int = 1,
) -> dict[str, Any]:
    """``count`` identical jobs, one every ``interval`` seconds (0: a burst)."""
    jobs = [
        _job(i + 1, start + i * interval, "delay", walltime, replicaset, groups)
        for i in range(count)
    ]
    profiles = {"delay": _pod_profile(delay, cpu, memory, scheduler)}
    return {"nb_res": 1, "jobs": jobs, "profiles": profiles}


def burst(count: int, delay: float, **kwargs: Any) -> dict[str, Any]:
    """Batkube's ``200_delay170`` shape: ``count`` jobs all submitted at ``start``."""
    return spaced(count, delay, 0.0, **kwargs)


def poisson(
    count: int,
    rate: float,
    mean_delay: float,
    *,
    seed: int,
    fixed_delay: bool = False,
    cpu: str = "1",
    memory: str | None = None,
    scheduler: str = DEFAULT_SCHEDULER,
    walltime: float | None = None,
    replicaset: str | None = None,
    groups: int = 1,
) -> dict[str, Any]:
    """Poisson arrivals at ``rate`` jobs/s; delays exponential with ``mean_delay`` (rounded
    to whole seconds, at least 1) unless ``fixed_delay``."""
    rng = random.Random(seed)
    jobs, profiles = [], {}
    now = 0.0
    for i in range(count):
        if i:
            now += rng.expovariate(rate)
        delay = mean_delay if fixed_delay else max(1, round(rng.expovariate(1 / mean_delay)))
        name = f"delay{_clean(delay)}"
        profiles.setdefault(name, _pod_profile(delay, cpu, memory, scheduler))
        jobs.append(_job(i + 1, round(now, 3), name, walltime, replicaset, groups))
    return {"nb_res": 1, "jobs": jobs, "profiles": profiles}


def mixed(
    count: int,
    rate: float,
    *,
    seed: int,
    gpu_fraction: float = 0.5,
    gpu_image_durations: tuple[float, float] = (100.0, 600.0),
    cpu_image_durations: tuple[float, float] = (300.0, 300.0),
    cpu: str = "1",
    memory: str = "1Gi",
    scheduler: str = DEFAULT_SCHEDULER,
    sharing_slowdown: bool = True,
) -> dict[str, Any]:
    """KubCG-style mix of two image classes with Poisson arrivals.

    A ``gpu`` job runs ``gpu_image_durations[0]`` s on a ``gpu`` node and ``[1]`` s on a
    ``cpu`` node; a ``cpu`` job ``cpu_image_durations`` likewise. Profiles carry
    ``timewarp.durations`` and, if ``sharing_slowdown``, ``timewarp.sharing_slowdown``; the
    base ``delay`` is the cpu-node duration (what real Batsim would run)."""
    rng = random.Random(seed)
    profiles: dict[str, Any] = {}
    for name, (on_gpu, on_cpu) in (
        ("gpu_image", gpu_image_durations),
        ("cpu_image", cpu_image_durations),
    ):
        profile = _pod_profile(on_cpu, cpu, memory, scheduler)
        profile["image_class"] = name.split("_")[0]
        ext: dict[str, Any] = {"durations": {"gpu": _clean(on_gpu), "cpu": _clean(on_cpu)}}
        if sharing_slowdown:
            ext["sharing_slowdown"] = True
        profile["timewarp"] = ext
        profiles[name] = profile
    jobs, now = [], 0.0
    for i in range(count):
        if i:
            now += rng.expovariate(rate)
        name = "gpu_image" if rng.random() < gpu_fraction else "cpu_image"
        jobs.append(_job(i + 1, round(now, 3), name, None))
    return {"nb_res": 1, "jobs": jobs, "profiles": profiles}


# --------------------------------------------------------------------------- platforms


def _host(name: str, speed: str, props: dict[str, str]) -> str:
    lines = [f"    <host id={quoteattr(name)} speed={quoteattr(speed)}>"]
    lines += [f"      <prop id={quoteattr(k)} value={quoteattr(v)}/>" for k, v in props.items()]
    lines.append("    </host>")
    return "\n".join(lines)


Node = tuple[str, dict[str, str]]  # host name, props


def platform_xml(nodes: list[Node], speed: str = "1Gf") -> str:
    """A SimGrid 4.1 platform: a master host plus ``nodes`` (name, props). The master is
    the host named ``master_host``, Batsim's default ``-m``: it carries no ``role=master``
    prop, which would make real Batsim 4.2.1 abort (the two give it the role twice)."""
    hosts = [_host("master_host", speed, {})]
    hosts += [_host(name, speed, props) for name, props in nodes]
    return (
        "<?xml version='1.0'?>\n"
        '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        '<platform version="4.1">\n'
        '  <zone id="cluster" routing="Full">\n' + "\n".join(hosts) + "\n  </zone>\n</platform>\n"
    )


def homogeneous_nodes(count: int, *, cores: int = 1, memory: str = "4Gi") -> list[Node]:
    """``count`` identical nodes ``node0``…, Batkube's ``core``/``memory`` props."""
    width = len(str(count - 1))
    return [(f"node{i:0{width}d}", {"core": str(cores), "memory": memory}) for i in range(count)]


def homogeneous_platform(
    count: int, *, cores: int = 1, memory: str = "4Gi", speed: str = "1Gf"
) -> str:
    return platform_xml(homogeneous_nodes(count, cores=cores, memory=memory), speed)


def cluster_platform(count: int) -> str:
    """Batsim's own ``cluster512.xml`` shape with ``count`` hosts ``a0``…: a cluster (50 µs,
    125 MB/s private links, a 500 µs backbone), the master in a cluster of its own, a
    500 µs link between their routers: 600 µs per message to the master, 1.2 ms from it
    to itself (a platform with a network, for the simulator's network model)."""
    return (
        "<?xml version='1.0'?>\n"
        '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        '<platform version="4.1">\n<zone id="AS0" routing="Full">\n'
        f'  <cluster id="my_cluster_1" prefix="a" suffix="" radical="0-{count - 1}" '
        'speed="1Gf" bw="125MBps" lat="50us" bb_bw="2.25GBps" bb_lat="500us"/>\n'
        '  <cluster id="my_cluster_2" prefix="master_host" suffix="" radical="0-0" '
        'speed="1Gf" bw="125MBps" lat="50us" bb_bw="2.25GBps" bb_lat="500us">\n'
        '    <prop id="role" value="master"/>\n  </cluster>\n'
        '  <link id="backbone" bandwidth="1.25GBps" latency="500us"/>\n'
        '  <zoneRoute src="my_cluster_1" dst="my_cluster_2" gw_src="amy_cluster_1_router" '
        'gw_dst="master_hostmy_cluster_2_router">\n    <link_ctn id="backbone"/>\n'
        "  </zoneRoute>\n</zone>\n</platform>\n"
    )


def heterogeneous_nodes(
    cpu_nodes: int,
    gpu_nodes: int,
    *,
    cores: int = 4,
    memory: str = "16Gi",
    gpus_per_node: int = 1,
) -> list[Node]:
    """CPU nodes ``cpu0``… (``node_class=cpu``) and GPU nodes ``gpu0``… (``node_class=gpu``,
    ``gpu`` = GPUs per node)."""
    width = len(str(max(cpu_nodes, gpu_nodes, 1) - 1))
    nodes = [
        (f"cpu{i:0{width}d}", {"core": str(cores), "memory": memory, "node_class": "cpu"})
        for i in range(cpu_nodes)
    ]
    nodes += [
        (
            f"gpu{i:0{width}d}",
            {"core": str(cores), "memory": memory, "node_class": "gpu", "gpu": str(gpus_per_node)},
        )
        for i in range(gpu_nodes)
    ]
    return nodes


def heterogeneous_platform(cpu_nodes: int, gpu_nodes: int, *, speed: str = "1Gf", **kw: Any) -> str:
    return platform_xml(heterogeneous_nodes(cpu_nodes, gpu_nodes, **kw), speed)
