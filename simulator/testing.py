"""Helpers for tests that drive the simulator (platforms, workloads, endpoints)."""

from __future__ import annotations

import socket
from pathlib import Path

from simulator import protocol
from simulator.inputs import make_sim, write_platform, write_workload  # noqa: F401  (re-exported for tests)

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
