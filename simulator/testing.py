"""Helpers for tests that drive the simulator (platforms, workloads, endpoints)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from simulator import protocol
from simulator.engine import Options, Simulator
from simulator.platform import load_platform
from simulator.workload import load_workload

ROOT = Path(__file__).resolve().parent.parent  # the checkout


def shared_data_dir() -> Path | None:
    """``shared/data`` beside the checkout (CI) or beside the worktree folder."""
    for base in (ROOT.parent, ROOT.parent.parent):
        path = base / "shared" / "data"
        if path.is_dir():
            return path
    return None


def free_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


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


def simulation_begins(
    hosts: list[dict], profiles: dict, *, workload: str = "w0", sharing: bool = False
) -> protocol.SimulationBegins:
    """A SIMULATION_BEGINS event for ``hosts`` (Batsim's compute-resource dicts) and one
    workload's ``profiles``, as the broker receives it (tests of the cluster model)."""
    return protocol.SimulationBegins(
        nb_resources=len(hosts),
        nb_compute_resources=len(hosts),
        nb_storage_resources=0,
        allow_compute_sharing=sharing,
        allow_storage_sharing=False,
        config={},
        compute_resources=hosts,
        storage_resources=[],
        workloads={workload: f"{workload}.json"},
        profiles={workload: profiles},
    )
