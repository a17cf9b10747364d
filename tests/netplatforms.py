"""Platforms with networks, written for the tests that compare the embedded simulator with
real Batsim 4.2.1 on them (links, routes, clusters, backbones, zones), and seeded
workloads to run on them."""

from __future__ import annotations

import random
from typing import Any

HEAD = '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'


def cluster(hosts: int) -> str:
    """Batsim's own cluster512.xml's shape: a cluster of ``hosts``, the master in a
    cluster of its own, a backbone between their routers (600 µs per message)."""
    return HEAD + (
        '<platform version="4.1"><zone id="AS0" routing="Full">'
        f'<cluster id="my_cluster_1" prefix="a" suffix="" radical="0-{hosts - 1}" speed="1Gf" '
        'bw="125MBps" lat="50us" bb_bw="2.25GBps" bb_lat="500us"/>'
        '<cluster id="my_cluster_2" prefix="master_host" suffix="" radical="0-0" speed="1Gf" '
        'bw="125MBps" lat="50us" bb_bw="2.25GBps" bb_lat="500us">'
        '<prop id="role" value="master"/></cluster>'
        '<link id="backbone" bandwidth="1.25GBps" latency="500us"/>'
        '<zoneRoute src="my_cluster_1" dst="my_cluster_2" gw_src="amy_cluster_1_router" '
        'gw_dst="master_hostmy_cluster_2_router"><link_ctn id="backbone"/></zoneRoute>'
        "</zone></platform>\n"
    )


PLATFORMS: dict[str, tuple[str, tuple[str, ...]]] = {
    # name: (platform text, extra flags)
    "full, loopback route": (
        HEAD + '<platform version="4.1"><zone id="z" routing="Full">'
        '<host id="master_host" speed="1Gf"/><host id="n0" speed="1Gf"/>'
        '<host id="n1" speed="1Gf"/><host id="n2" speed="2Gf"/>'
        '<link id="lo" bandwidth="10GBps" latency="15us" sharing_policy="FATPIPE"/>'
        '<link id="l0" bandwidth="1GBps" latency="50us"/>'
        '<link id="l1" bandwidth="1Gbps" latency="2ms"/>'
        '<link id="l2" bandwidth="100MBps" latency="1.461517ms" sharing_policy="SPLITDUPLEX"/>'
        '<route src="master_host" dst="master_host"><link_ctn id="lo"/></route>'
        '<route src="master_host" dst="n0"><link_ctn id="l0"/></route>'
        '<route src="n1" dst="master_host" symmetrical="NO"><link_ctn id="l1"/>'
        '<link_ctn id="l0"/></route>'
        '<route src="master_host" dst="n1" symmetrical="NO"><link_ctn id="l1"/></route>'
        '<route src="master_host" dst="n2"><link_ctn id="l2" direction="UP"/>'
        '<link_ctn id="l0"/></route>'
        "</zone></platform>\n",
        (),
    ),
    "full, routes to some hosts only": (
        HEAD + '<platform version="4.1"><zone id="z" routing="Full">'
        '<host id="master_host" speed="1Gf"/><host id="n0" speed="1Gf"/>'
        '<host id="n1" speed="1Gf"/><host id="n2" speed="1Gf"/>'
        '<link id="l0" bandwidth="125MBps" latency="100us"/>'
        '<route src="master_host" dst="n1"><link_ctn id="l0"/></route>'
        "</zone></platform>\n",
        (),
    ),
    "floyd, router, three sharing policies": (
        HEAD + '<platform version="4.1"><zone id="z" routing="Floyd">'
        '<host id="master_host" speed="1Gf"/><host id="n0" speed="1Gf"/>'
        '<host id="n1" speed="2Gf"/><router id="r"/>'
        '<link id="a" bandwidth="1Gbps" latency="100us"/>'
        '<link id="b" bandwidth="10Gbps" latency="20us" sharing_policy="SPLITDUPLEX"/>'
        '<link id="c" bandwidth="100MBps" latency="1ms" sharing_policy="FATPIPE"/>'
        '<route src="master_host" dst="r"><link_ctn id="a"/></route>'
        '<route src="r" dst="n0"><link_ctn id="b" direction="UP"/></route>'
        '<route src="r" dst="n1"><link_ctn id="c"/></route>'
        "</zone></platform>\n",
        (),
    ),
    "dijkstra": (
        HEAD + '<platform version="4.1"><zone id="z" routing="Dijkstra">'
        '<host id="master_host" speed="1Gf"/><host id="n0" speed="1Gf"/>'
        '<host id="n1" speed="1Gf"/><router id="r"/>'
        '<link id="a" bandwidth="1GBps" latency="300us"/>'
        '<link id="b" bandwidth="1GBps" latency="40us"/>'
        '<route src="master_host" dst="r"><link_ctn id="a"/></route>'
        '<route src="r" dst="n0"><link_ctn id="b"/></route>'
        '<route src="n0" dst="n1"><link_ctn id="b"/></route>'
        "</zone></platform>\n",
        (),
    ),
    "vivaldi hosts": (
        HEAD + '<platform version="4.1"><zone id="z" routing="Vivaldi">'
        '<host id="master_host" speed="1Gf" coordinates="0 0 0"/>'
        '<host id="h0" speed="1Gf" coordinates="3 4 0.5"/>'
        '<host id="h1" speed="1Gf" coordinates="-1 2 0"/>'
        '<host id="h2" speed="1Gf" coordinates="10 0 0"/>'
        "</zone></platform>\n",
        (),
    ),
    "vivaldi at 0 0 0": (
        HEAD + '<platform version="4.1"><zone id="z" routing="Vivaldi">'
        '<host id="master_host" speed="1Gf" coordinates="0 0 0"/>'
        '<host id="h0" speed="1Gf" coordinates="0 0 0"/>'
        '<host id="h1" speed="1Gf" coordinates="0 0 0"/>'
        '<host id="h2" speed="1Gf" coordinates="0 0 0"/>'
        "</zone></platform>\n",
        (),
    ),
    "vivaldi peers": (
        HEAD + '<platform version="4.1"><zone id="z" routing="Vivaldi">'
        '<peer id="master_host" coordinates="0 0 0" speed="1Gf" bw_in="1GBps" bw_out="1GBps"/>'
        '<peer id="p0" coordinates="3 4 0.5" speed="1Gf" bw_in="100MBps" bw_out="50MBps"/>'
        '<peer id="p1" coordinates="-1 2 0" speed="1Gf" bw_in="100MBps" bw_out="50MBps"/>'
        '<peer id="p2" coordinates="10 0 0" speed="1Gf" bw_in="1MBps" bw_out="1MBps"/>'
        "</zone></platform>\n",
        (),
    ),
    "cluster with loopback and limiter, master beside it": (
        HEAD + '<platform version="4.1"><zone id="main" routing="Full">'
        '<cluster id="c" prefix="node" suffix="" radical="0-5" speed="1Gf" bw="1Gbps" '
        'lat="30us" bb_bw="10Gbps" bb_lat="200us" loopback_bw="5GBps" loopback_lat="3us" '
        'limiter_link="2Gbps" sharing_policy="SHARED"/>'
        '<zone id="m" routing="Full"><host id="master_host" speed="1Gf"/></zone>'
        '<link id="bb" bandwidth="1GBps" latency="70us"/>'
        '<zoneRoute src="c" dst="m" gw_src="nodec_router" gw_dst="master_host">'
        '<link_ctn id="bb"/></zoneRoute>'
        "</zone></platform>\n",
        (),
    ),
    "master inside a cluster": (
        HEAD + '<platform version="4.1">'
        '<cluster id="c" prefix="n" suffix="" radical="0-5" speed="1Gf" bw="125MBps" '
        'lat="50us" bb_bw="2.25GBps" bb_lat="500us"/>'
        "</platform>\n",
        ("-m", "n0"),
    ),
    "cluster of 8, master cluster, backbone": (cluster(8), ()),
    "zone routed Cluster: cabinets, host links, backbone": (
        HEAD + '<platform version="4.1"><zone id="main" routing="Full">'
        '<zone id="m" routing="Full"><host id="master_host" speed="1Gf"/></zone>'
        '<zone id="c" routing="Cluster">'
        '<link id="u0" bandwidth="1Gbps" latency="20us"/><link id="d0" bandwidth="2Gbps" latency="5us"/>'
        '<host id="h0" speed="1Gf"/><host_link id="h0" up="u0" down="d0"/>'
        '<cabinet id="cab" prefix="k" suffix="" speed="2Gf" bw="10Gbps" lat="1us" radical="1-2"/>'
        '<router id="rc"/><backbone id="bb" bandwidth="10Gbps" latency="300us"/>'
        "</zone>"
        '<link id="up" bandwidth="1GBps" latency="40us"/>'
        '<zoneRoute src="c" dst="m" gw_src="rc" gw_dst="master_host"><link_ctn id="up"/>'
        "</zoneRoute></zone></platform>\n",
        (),
    ),
}


def workload(seed: int, nodes: int, jobs: int = 18) -> dict[str, Any]:
    """Jobs sharing subtimes (a burst at 0: completions in flight decide what a FCFS
    sees free), delays and parallel tasks without communication."""
    rng = random.Random(seed)
    return {
        "nb_res": nodes,
        "jobs": [
            {
                "id": str(i + 1),
                "subtime": rng.choice([0, 0, 0, 1, 5, 5, 12.5, 30]),
                "res": rng.randint(1, nodes),
                "profile": rng.choice(["a", "b", "ph"]),
            }
            for i in range(jobs)
        ],
        "profiles": {
            "a": {"type": "delay", "delay": 10},
            "b": {"type": "delay", "delay": 3.3333333},
            "ph": {"type": "parallel_homogeneous", "cpu": 2e9, "com": 0},
        },
    }


def random_platform(seed: int) -> tuple[str, int]:
    """A seeded random platform with a network (a Full zone of hosts with links and
    routes, or a cluster beside the master's zone, or the master inside a cluster) and
    how many compute hosts it has; the master is ``master_host``."""
    rng = random.Random(seed)

    def lat() -> str:
        return rng.choice(["0", "1.5us", "15us", "50us", "0.1ms", "1.461517ms", "2ms"])

    def bw() -> str:
        return rng.choice(
            ["10GBps", "1Gbps", "125MBps", "41.279125MBps", "1.25E8Bps", "10000MiBps"]
        )

    def policy() -> str:
        return rng.choice(["SHARED", "FATPIPE", "SPLITDUPLEX"])

    kind = rng.choice(["full", "cluster", "cluster"])
    nodes = rng.randint(1, 6)
    if kind == "full":
        hosts = ["master_host"] + [f"n{i}" for i in range(nodes)]
        links, routes = [], []
        for i in range(rng.randint(1, 5)):
            links.append((f"l{i}", policy()))
        parts = [f'<host id="{h}" speed="1Gf"/>' for h in hosts]
        parts += [
            f'<link id="{name}" bandwidth="{bw()}" latency="{lat()}" sharing_policy="{pol}"/>'
            for name, pol in links
        ]
        for src in hosts:
            for dst in hosts:
                if src > dst or rng.random() < 0.25:
                    continue
                chosen = rng.sample(links, rng.randint(1, len(links)))
                ctn = "".join(
                    f'<link_ctn id="{name}"'
                    + (f' direction="{rng.choice(["UP", "DOWN"])}"' if pol == "SPLITDUPLEX" else "")
                    + "/>"
                    for name, pol in chosen
                )
                routes.append(f'<route src="{src}" dst="{dst}">{ctn}</route>')
        body = '<zone id="z" routing="Full">' + "".join(parts + routes) + "</zone>"
        return HEAD + f'<platform version="4.1">{body}</platform>\n', nodes
    extra = ""
    if rng.random() < 0.5:
        extra += f' loopback_bw="{bw()}" loopback_lat="{lat()}"'
    if rng.random() < 0.3:
        extra += f' limiter_link="{bw()}"'
    if rng.random() < 0.7:
        extra += f' bb_bw="{bw()}" bb_lat="{lat()}"'
    pol = rng.choice(["SHARED", "FATPIPE", "SPLITDUPLEX"])
    if kind == "cluster" and rng.random() < 0.5:  # the master inside the cluster
        return HEAD + (
            '<platform version="4.1"><zone id="main" routing="Full">'
            f'<cluster id="c" prefix="n" suffix="" radical="0-{nodes - 1}" speed="1Gf" '
            f'bw="{bw()}" lat="{lat()}" sharing_policy="{pol}"{extra}/>'
            '<cluster id="m" prefix="master_host" suffix="" radical="0-0" speed="1Gf" '
            f'bw="{bw()}" lat="{lat()}"{extra}><prop id="role" value="master"/></cluster>'
            f'<link id="bb" bandwidth="{bw()}" latency="{lat()}"/>'
            '<zoneRoute src="c" dst="m" gw_src="nc_router" gw_dst="master_hostm_router">'
            '<link_ctn id="bb"/></zoneRoute></zone></platform>\n'
        ), nodes
    return HEAD + (
        '<platform version="4.1"><zone id="main" routing="Full">'
        f'<cluster id="c" prefix="n" suffix="" radical="0-{nodes - 1}" speed="1Gf" '
        f'bw="{bw()}" lat="{lat()}" sharing_policy="{pol}"{extra}/>'
        '<zone id="m" routing="Full"><host id="master_host" speed="1Gf"/></zone>'
        f'<link id="bb" bandwidth="{bw()}" latency="{lat()}"/>'
        '<zoneRoute src="c" dst="m" gw_src="nc_router" gw_dst="master_host">'
        '<link_ctn id="bb"/></zoneRoute></zone></platform>\n'
    ), nodes


def ptask_workload(seed: int, nodes: int, jobs: int = 16) -> dict[str, Any]:
    """Communicating parallel tasks: ``parallel_homogeneous`` with com > 0,
    ``parallel_homogeneous_total``, ``parallel`` (a cpu vector and a com matrix over
    every host), some under a walltime, between delays."""
    rng = random.Random(seed)
    out = []
    for i in range(jobs):
        profile = rng.choice(["a", "phc", "pht", "par"])
        job: dict[str, Any] = {
            "id": str(i + 1),
            "subtime": rng.choice([0, 0, 0, 1, 5, 5, 12.5, 30]),
            "res": nodes if profile == "par" else rng.randint(1, nodes),
            "profile": profile,
        }
        if rng.random() < 0.2:
            job["walltime"] = rng.choice([1, 5, 30])
        out.append(job)
    par = {
        "type": "parallel",
        "cpu": [rng.choice([0, 1e9, 3e9]) for _ in range(nodes)],
        "com": [
            0 if i % (nodes + 1) == 0 else rng.choice([0, 1e6, 5e8]) for i in range(nodes * nodes)
        ],
    }
    return {
        "nb_res": nodes,
        "jobs": out,
        "profiles": {
            "a": {"type": "delay", "delay": 10},
            "phc": {"type": "parallel_homogeneous", "cpu": 2e9, "com": 3e7},
            "pht": {"type": "parallel_homogeneous_total", "cpu": 4e9, "com": 2e8},
            "par": par,
        },
    }
