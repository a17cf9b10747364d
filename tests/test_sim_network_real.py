"""Protocol messages charged network time, side by side with real Batsim 4.2.1 on platforms
with links, routes, clusters, backbones and zones (``tests/netplatforms.py``).

1. The project's FCFS on raw messages: every message from both simulators the same, at
   Batsim's precision (times shifted by each route's latency, completions in flight).
   Communicating parallel tasks (``parallel``, ``parallel_homogeneous`` with com > 0,
   ``parallel_homogeneous_total``) on each platform too.
2. ``timewarp sim`` and the ``batsim`` binary as a user runs them, each against a
   decision process of its own — the project's FCFS and pybatsim's ``schedFcfs`` (on a
   platform whose master has a loopback link: its first submission comes after 30 µs,
   not at 0, which it asserts) — give byte-identical jobs CSVs; on a 512-host cluster too.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from netplatforms import PLATFORMS, cluster, ptask_workload, random_platform, workload
from realbatsim import (
    Chaos,
    FixedScenario,
    batsim_or_skip,
    canonical,
    differing_outputs,
    fcfs_decider,
    run_embedded,
    run_pair,
    run_real,
    scenario,
)

pytestmark = pytest.mark.batsim


@pytest.fixture(scope="module")
def batsim() -> Path:
    return batsim_or_skip()


def _nodes(name: str) -> int:
    """How many compute hosts the platform has (not counting its master)."""
    return {"master inside a cluster": 5, "cluster of 8, master cluster, backbone": 8,
            "floyd, router, three sharing policies": 2, "dijkstra": 2}.get(name, 3)  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_the_fcfs_gets_the_same_messages_on_a_platform_with_a_network(batsim, tmp_path, name, seed):
    text, flags = PLATFORMS[name]
    sc = FixedScenario(text, [workload(seed, _nodes(name))], flags)
    real, real_end = run_real(sc, 0, tmp_path, decide=fcfs_decider())
    ours, our_end = run_embedded(sc, 0, tmp_path, decide=fcfs_decider())
    assert real_end == our_end == "SIMULATION_ENDS"
    for index, (a, b) in enumerate(zip(real, ours, strict=False)):
        assert canonical(a) == canonical(b), f"message {index} differs"
    assert len(real) == len(ours)
    first = json.loads(real[1])["now"]  # the first submissions: hello, then them
    if name == "full, loopback route":  # 15 µs per message on the loopback, 3 in a row
        assert first == 4.5e-05
    elif name == "vivaldi at 0 0 0":  # SimGrid charges nothing there, nor does the embedded
        assert first == 0


@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_communicating_parallel_tasks_give_the_same_messages(batsim, tmp_path, name):
    """parallel (cpu vector + com matrix), parallel_homogeneous with com > 0 and
    parallel_homogeneous_total, some under a walltime: ptask_L07's latency, then
    computation and communication progressing together under max-min sharing."""
    text, flags = PLATFORMS[name]
    sc = FixedScenario(text, [ptask_workload(1, _nodes(name))], flags)
    real, real_end = run_real(sc, 0, tmp_path, decide=fcfs_decider())
    ours, our_end = run_embedded(sc, 0, tmp_path, decide=fcfs_decider())
    assert real_end == our_end == "SIMULATION_ENDS"
    for index, (a, b) in enumerate(zip(real, ours, strict=False)):
        assert canonical(a) == canonical(b), f"message {index} differs"
    assert len(real) == len(ours)
    assert b"REJECTED" not in (tmp_path / "real_jobs.csv").read_bytes()


def _random_run(tmp_path: Path, seed: int, communicating: bool = False) -> None:
    """The random decision process of tests/realbatsim.py (kills, timers, dynamic jobs,
    replies stamped late) on a seeded random platform with a network; ``communicating``:
    its parallel tasks send bytes (parallel_homogeneous with com > 0, or _total)."""
    text, nodes = random_platform(seed)
    base = scenario(seed)
    for work in base.workloads:
        work["nb_res"] = nodes
        for job in work["jobs"]:
            job["res"] = min(job["res"], nodes)
        if communicating:
            work["profiles"]["ph"] = (
                {"type": "parallel_homogeneous_total", "cpu": 2e9, "com": 5e7}
                if seed % 2
                else {"type": "parallel_homogeneous", "cpu": 1e9, "com": [1e6, 3e7, 2e8][seed % 3]}
            )
    sc = FixedScenario(text, base.workloads, tuple(base.flags()))
    sc.nodes = nodes
    real, real_end = run_real(sc, seed, tmp_path, decide=Chaos(seed, sc))
    ours, our_end = run_embedded(sc, seed, tmp_path, decide=Chaos(seed, sc))
    for index, (a, b) in enumerate(zip(real, ours, strict=False)):
        assert canonical(a) == canonical(b), f"seed {seed}: message {index} differs"
    assert len(real) == len(ours), seed
    assert (real_end == "SIMULATION_ENDS") == (our_end == "SIMULATION_ENDS"), (real_end, our_end)


@pytest.mark.parametrize("seed", [1, 2, 3, 5])
def test_random_decisions_on_a_random_platform_give_the_same_messages(batsim, tmp_path, seed):
    _random_run(tmp_path, seed)


@pytest.mark.parametrize("seed", [1, 3, 6, 7])
def test_random_decisions_on_communicating_tasks_give_the_same_messages(batsim, tmp_path, seed):
    _random_run(tmp_path, seed, communicating=True)


@pytest.mark.slow
def test_two_hundred_random_platforms_give_the_same_messages(batsim, tmp_path):
    for seed in range(1, 201):
        _random_run(tmp_path / str(seed), seed)
        _random_run(tmp_path / f"{seed}c", seed, communicating=True)


# --------------------------------------------------------------------------- as users run them


ENERGY_HOSTS = (
    '<host id="master_host" speed="1Gf" coordinates="0 0 0">'
    '<prop id="wattage_per_state" value="100:200"/><prop id="wattage_off" value="10"/></host>'
    '<host id="e0" speed="100Mf, 1e-9Mf, 50Mf" pstate="0" coordinates="0 0 0">'
    '<prop id="wattage_per_state" value="30.0:100.0, 9.75:9.75, 20:40"/>'
    '<prop id="wattage_off" value="5"/><prop id="sleep_pstates" value="1:1:1"/></host>'
    '<host id="e1" speed="100Mf, 1e-9Mf, 50Mf" pstate="2" coordinates="0 0 0">'
    '<prop id="wattage_per_state" value="30.0:100.0, 9.75:9.75, 20:40"/></host>'
    '<host id="e2" speed="200Mf" core="4" coordinates="0 0 0">'
    '<prop id="wattage_per_state" value="50:60:170"/></host>'
    '<host id="e3" speed="100Mf" coordinates="0 0 0">'
    '<prop id="wattage_per_state" value="12.5:77.7"/></host>'
)
ENERGY_PLATFORMS = {
    "vivaldi, no network": '<zone id="z" routing="Vivaldi">' + ENERGY_HOSTS + "</zone>",
    "full, loopback and links": (
        '<zone id="z" routing="Full">'
        + ENERGY_HOSTS.replace(' coordinates="0 0 0"', "")
        + '<link id="lo" bandwidth="10GBps" latency="15us"/>'
        '<link id="l" bandwidth="125MBps" latency="100us"/>'
        '<route src="master_host" dst="master_host"><link_ctn id="lo"/></route>'
        + "".join(
            f'<route src="master_host" dst="e{i}"><link_ctn id="l"/></route>' for i in range(4)
        )
        + "</zone>"
    ),
}


@pytest.mark.parametrize("name", sorted(ENERGY_PLATFORMS))
def test_energy_files_are_the_same_as_batsims(batsim, tmp_path, subprocess_env, name):
    """-E: each job's consumed_energy (idle power while a delay sleeps, epsilon + load ×
    slope while a parallel task computes, and on until its actor ends past a walltime;
    a host starting in power state 2, which SimGrid's plugin counts as state 0 until its
    first update; a 4-core host, heterogeneous speeds), _consumed_energy.csv (sums in
    long double) and _pstate_changes.csv byte-identical, and schedule.csv's
    consumed_joules."""
    text = (
        '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        f'<platform version="4.1">{ENERGY_PLATFORMS[name]}</platform>\n'
    )
    wl = workload(4, 4, 24)
    for job in wl["jobs"][::5]:
        job["walltime"] = 2  # some reach it: a parallel task cut, a delay cut
    real, ours = run_pair(batsim, tmp_path, subprocess_env, text, wl, _fcfs, ("-E",))
    assert real == ours
    energies = [row.split(",")[-2] for row in real.decode().splitlines()[1:]]
    assert all(float(e) > 0 for e in energies), energies  # every job has its energy
    for kind in ("consumed_energy", "pstate_changes"):
        a = (tmp_path / "real" / f"out_{kind}.csv").read_bytes()
        assert a == (tmp_path / "ours" / f"out_{kind}.csv").read_bytes(), kind
    joules = [
        (tmp_path / who / "out_schedule.csv").read_text().splitlines()[1].split(",")[1]
        for who in ("real", "ours")
    ]
    assert joules[0] == joules[1] and float(joules[0]) > 0


def _fcfs(endpoint: str) -> list[str]:
    return [sys.executable, "-m", "simulator.fcfs", endpoint]


@pytest.mark.parametrize(
    "name", ["full, loopback route", "cluster with loopback and limiter, master beside it"]
)
def test_timewarp_sim_and_batsim_write_the_same_jobs_csv(batsim, tmp_path, subprocess_env, name):
    """And the same machine_states.csv (a row per job start or end, jobs of up to 3
    machines among them) and schedule.csv (its wall-clock times aside)."""
    text, flags = PLATFORMS[name]
    wl = workload(7, _nodes(name), 30)
    assert max(job["res"] for job in wl["jobs"]) >= 3
    real, ours = run_pair(batsim, tmp_path, subprocess_env, text, wl, _fcfs, flags)
    assert real == ours
    assert real.count(b"\n") == 31
    assert differing_outputs(tmp_path, ("machine_states", "schedule")) == []


def test_a_512_host_cluster_gives_the_same_jobs_csv(batsim, tmp_path, subprocess_env):
    """Batsim's cluster512.xml's shape: 600 µs per message to the master."""
    real, ours = run_pair(
        batsim, tmp_path, subprocess_env, cluster(512), workload(11, 512, 200), _fcfs
    )
    assert real == ours
    assert real.count(b"\n") == 201


@pytest.mark.skipif(
    importlib.util.find_spec("batsim") is None or importlib.util.find_spec("schedulers") is None,
    reason="pybatsim is not installed (scripts/setup-venv.sh installs it --no-deps)",
)
def test_pybatsim_schedfcfs_runs_on_a_loopback_link_as_on_batsim(batsim, tmp_path, subprocess_env):
    """pybatsim's batsim.sched asserts now > 0 at a submission: with the master's
    loopback link (15 µs) the first submissions come at 30 µs, on both simulators."""
    jobs = [
        {"id": i + 1, "subtime": [0, 0, 0, 2, 2, 7][i % 6], "res": 1 + i % 3,
         "profile": ["d10", "d5", "d2"][i % 3], "walltime": 20}
        for i in range(12)
    ]  # fmt: skip
    wl = {
        "nb_res": 4,
        "jobs": jobs,
        "profiles": {f"d{d}": {"type": "delay", "delay": d} for d in (10, 5, 2)},
    }
    text = PLATFORMS["full, loopback route"][0].replace(
        '<host id="n2" speed="2Gf"/>', '<host id="n2" speed="2Gf"/><host id="n3" speed="1Gf"/>'
    )

    def sched(endpoint: str) -> list[str]:
        return [sys.executable, "-m", "batsim.cmds.launcher", "schedFcfs", "-s", endpoint,
                "-t", "30000"]  # fmt: skip

    real, ours = run_pair(batsim, tmp_path, subprocess_env, text, wl, sched)
    assert real == ours
    assert real.count(b"\n") == 13


def test_a_route_through_a_zone_routed_none_is_refused_as_batsim_aborts(batsim, tmp_path):
    """Batsim's own platforms/platform.xml puts its master in a zone routed None: SimGrid
    aborts at the first message ("There can't be route in an Empty zone"); the embedded
    simulator refuses the platform when it reads it, with that reason."""
    from simulator.platform import PlatformError, load_platform

    text = PLATFORMS["vivaldi at 0 0 0"][0].replace('routing="Vivaldi"', 'routing="None"')
    sc = FixedScenario(text, [workload(1, 3)])
    _, real_end = run_real(sc, 0, tmp_path, decide=fcfs_decider())
    assert real_end.startswith("exit") and real_end != "exit 0"
    assert "There can't be route in an Empty zone" in (tmp_path / "batsim.log").read_text()
    with pytest.raises(PlatformError, match="There can't be route in an Empty zone"):
        load_platform(tmp_path / "platform.xml")


def test_a_route_in_a_zone_routed_none_is_refused_as_batsim_aborts(batsim, tmp_path):
    text = PLATFORMS["full, loopback route"][0].replace('routing="Full"', 'routing="None"')
    sc = FixedScenario(text, [workload(1, 3)])
    _, real_end = run_real(sc, 0, tmp_path, decide=fcfs_decider())
    assert real_end.startswith("exit") and real_end != "exit 0"
    assert "does not accept new routes" in (tmp_path / "batsim.log").read_text()
    from simulator.platform import PlatformError, load_platform

    with pytest.raises(PlatformError, match="does not accept new routes"):
        load_platform(tmp_path / "platform.xml")
