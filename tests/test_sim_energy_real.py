"""Power states switched through the protocol under ``-E`` (SET_RESOURCE_STATE), side by
side with real Batsim 4.2.1: ``timewarp sim`` and the ``batsim`` binary, each against
``tests/pstate_decider.py`` (an FCFS that sends machines to sleep, wakes them, and slows
one down), must write the same jobs CSV, machine_states.csv, schedule.csv (its wall-clock
times aside), _consumed_energy.csv and _pstate_changes.csv.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from realbatsim import batsim_or_skip, differing_outputs, run_pair

pytestmark = pytest.mark.batsim

DECIDER = Path(__file__).with_name("pstate_decider.py")
OUTPUTS = ("jobs", "machine_states", "schedule", "consumed_energy", "pstate_changes")


@pytest.fixture(scope="module")
def batsim() -> Path:
    return batsim_or_skip()


def _hosts(coordinates: str) -> str:
    """Six hosts of five power states: 0 and 4 compute (100 and 50 Mflop/s), 1 sleeps,
    2 and 3 are its switch-off (2 s: 1 flop at 0.5 flop/s) and switch-on (4 s) virtual
    states; e2 has two cores (a switch loads one: half its range); e5 starts in state 4
    and has no sleep state."""
    hosts = ['<host id="master_host" speed="1Gf"' + coordinates + ">"
             '<prop id="wattage_per_state" value="100:200"/></host>']  # fmt: skip
    for i in range(6):
        core = ' core="2"' if i == 2 else ""
        pstate = ' pstate="4"' if i == 5 else ""
        sleep = "" if i == 5 else '<prop id="sleep_pstates" value="1:2:3"/>'
        hosts.append(
            f'<host id="e{i}" speed="100Mf, 1e-6Mf, 0.5f, 0.25f, 50Mf"{core}{pstate}'
            f"{coordinates}>"
            '<prop id="wattage_per_state" value="30:40:100, 9.75:9.75, 110:125, 90:101, '
            f'20:60"/>{sleep}<prop id="wattage_off" value="5"/></host>'
        )
    return "".join(hosts)


PLATFORMS = {
    "vivaldi, no network": '<zone id="z" routing="Vivaldi">' + _hosts(' coordinates="0 0 0"')
    + "</zone>",
    "full, loopback and links": (
        '<zone id="z" routing="Full">' + _hosts("")
        + '<link id="lo" bandwidth="10GBps" latency="15us"/>'
        '<link id="l" bandwidth="125MBps" latency="100us"/>'
        '<route src="master_host" dst="master_host"><link_ctn id="lo"/></route>'
        + "".join(f'<route src="master_host" dst="e{i}"><link_ctn id="l"/></route>'
                  for i in range(6))
        + "</zone>"
    ),
}  # fmt: skip


def _workload(seed: int) -> dict:
    """Bursts and quiet spells: machines go to sleep while nothing waits, wake when three
    jobs do; delays, and parallel tasks (whose speed is the power state's)."""
    rng = random.Random(seed)
    jobs = [
        {"id": str(i + 1), "subtime": rng.choice([0, 0, 1, 5, 30, 60, 61, 100, 150, 151]),
         "res": rng.randint(1, 3), "profile": rng.choice(["a", "b", "ph"])}
        for i in range(24)
    ]  # fmt: skip
    for job in jobs[::7]:
        job["walltime"] = 15
    profiles = {
        "a": {"type": "delay", "delay": 10},
        "b": {"type": "delay", "delay": 3.3333333},
        "ph": {"type": "parallel_homogeneous", "cpu": 2e9, "com": 0},
    }
    return {"nb_res": 6, "jobs": jobs, "profiles": profiles}


def _decider(endpoint: str) -> list[str]:
    return [sys.executable, str(DECIDER), endpoint]


@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_switching_power_states_gives_batsims_outputs(batsim, tmp_path, subprocess_env, name, seed):
    text = (
        '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        f'<platform version="4.1">{PLATFORMS[name]}</platform>\n'
    )
    real, ours = run_pair(
        batsim, tmp_path, subprocess_env, text, _workload(seed), _decider, ("-E",)
    )
    assert real == ours
    assert differing_outputs(tmp_path, OUTPUTS) == []
    # the run switched machines: to sleep (-2), awake (-1), to the slower state 4
    changes = (tmp_path / "real" / "out_pstate_changes.csv").read_text().splitlines()
    assert changes[1:3] == ["0,0-4,0", "0,5,4"]  # the initial states
    states = {row.rsplit(",", 1)[1] for row in changes[3:]}
    assert {"-2", "-1", "1", "0", "4"} <= states, changes
    schedule = dict(zip(*(line.split(",") for line in (tmp_path / "real" / "out_schedule.csv")
                          .read_text().splitlines()), strict=True))  # fmt: skip
    assert float(schedule["time_sleeping"]) > 0 and float(schedule["time_switching_on"]) > 0
    assert int(schedule["nb_machine_switches"]) > int(schedule["nb_grouped_switches"]) > 2
