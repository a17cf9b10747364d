"""Simulation inputs made from code: a small platform file (a master host and identical
compute hosts), a workload file, and a ``Simulator`` built from files — what the
in-process driver (``broker/drivers/inprocess.py``), benchmarks and tests use."""

from __future__ import annotations

import json
from pathlib import Path

from simulator.engine import Options, Simulator
from simulator.platform import load_platform
from simulator.workload import load_workload


def write_platform(path: Path, nodes: int, cores: int = 1, speed: str = "1Gf", props=None) -> Path:
    hosts = ['<host id="master_host" speed="1Gf"/>']  # Batsim's default -m
    for i in range(nodes):
        extra = "".join(
            f'<prop id="{k}" value="{v}"/>' for k, v in ((props or {}).get(i, {})).items()
        )
        hosts.append(
            f'<host id="n{i:03d}" speed="{speed}"><prop id="core" value="{cores}"/>{extra}</host>'
        )
    path.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        '<platform version="4.1"><zone id="z" routing="Full">'
        + "".join(hosts)
        + "</zone></platform>\n"
    )
    return path


def write_workload(path: Path, jobs: list[dict], profiles: dict) -> Path:
    path.write_text(json.dumps({"nb_res": 1, "jobs": jobs, "profiles": profiles}))
    return path


def make_sim(
    platform: Path, workloads: list[Path], master_host: str = "master_host", **options
) -> Simulator:
    plat = load_platform(platform, master_host)
    loaded = [load_workload(w, f"w{i}", len(plat.compute)) for i, w in enumerate(workloads)]
    return Simulator(plat, loaded, Options(**options))
