"""The broker's CALL_ME_LATER on platforms with a network (issue 28, class 1, the decision
process's side): each event of a reply reaches Batsim's server as a message over the
master host's route, so a timer that falls within that network time must be asked for
after it — or Batsim aborts ("You asked to be awaken in the past!").

1. Batkube's own inputs: spaced_200_delay170 on its cluster16.xml (600 µs per message)
   runs to the end with the embedded simulator and with real Batsim, same jobs CSV.
2. A scheduler whose every timer after a binding falls within the reply's network time
   (``tests/programs/jittery_binder.py``), on platforms with latencies and loopback
   links, in the three time modes, and with ``timewarp broker --platform``.
3. The rule itself (``Platform.reply_transit`` + ``protocol.earliest_call``, what the
   three drivers ask) against the embedded simulator on seeded random platforms, and
   against real Batsim on a few.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from netplatforms import PLATFORMS, cluster, random_platform, workload
from realbatsim import FixedScenario, batsim_or_skip, run_embedded, run_real
from simrun import run_simulate

from simulator import generators
from simulator import protocol as p
from simulator.fcfs import Fcfs
from simulator.platform import load_platform
from simulator.testing import ROOT, shared_data_dir

DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"
JITTERY = ROOT / "tests" / "programs" / "jittery_binder.py"
# the master host in a cluster of its own whose loopback link has a latency: its
# messages to itself cross that link (3 µs), the compute hosts' cross the backbone
LOOPBACK_CLUSTER = (
    '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
    '<platform version="4.1"><zone id="AS0" routing="Full">'
    '<cluster id="c" prefix="n" suffix="" radical="0-3" speed="1Gf" bw="1Gbps" lat="30us" '
    'bb_bw="10Gbps" bb_lat="200us"/>'
    '<cluster id="m" prefix="master_host" suffix="" radical="0-0" speed="1Gf" bw="125MBps" '
    'lat="50us" loopback_bw="1GBps" loopback_lat="300us"><prop id="role" value="master"/>'
    "</cluster>"
    '<link id="bb" bandwidth="1GBps" latency="70us"/>'
    '<zoneRoute src="c" dst="m" gw_src="nc_router" gw_dst="master_hostm_router">'
    '<link_ctn id="bb"/></zoneRoute></zone></platform>\n'
)
NET_PLATFORMS = {
    # name: (platform text, the jittery scheduler's seed)
    "cluster with lat and bb_lat": (cluster(4), 1),
    "full zone, loopback link on the master": (PLATFORMS["full, loopback route"][0], 1),
    "master cluster with a loopback link": (LOOPBACK_CLUSTER, 3),
}


def _run(env, tmp_path: Path, name: str, scheduler: str, platform, workload_path, *extra):  # type: ignore[no-untyped-def]
    out = tmp_path / name
    proc = run_simulate(out, env, scheduler, platform, workload_path, *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ok"] is True and manifest["outputs"] == "complete"
    return out


# --------------------------------------------------------------------------- 1. Batkube's inputs


@pytest.mark.batsim
def test_batkube_spaced_200_on_its_cluster16_runs_on_both_simulators_with_the_same_jobs_csv(
    tmp_path, subprocess_env
):
    """The default scheduler's timer fell 0.6 ms after a reply that started a job: the
    broker asked Batsim to wake it at 820.0106 while its clock was already at 820.0112
    (both simulators aborted)."""
    data = shared_data_dir()
    if data is None:
        pytest.skip("shared/data is not beside this checkout")
    batsim = batsim_or_skip()
    args = (
        DEFAULT_LIKE,
        data / "batkube/platforms/cluster16.xml",
        data / "batkube/workloads/spaced_200_delay170.json",
    )
    ours = _run(subprocess_env, tmp_path, "embedded", *args)
    real = _run(subprocess_env, tmp_path, "real", *args, "--batsim", str(batsim))
    jobs = (ours / "out_jobs.csv").read_bytes()
    assert jobs == (real / "out_jobs.csv").read_bytes()
    assert jobs.count(b"COMPLETED_SUCCESSFULLY") == 200


# --------------------------------------------------------------------------- 2. timers in the window


def _platform_and_burst(tmp_path: Path, text: str, jobs: int = 12, delay: float = 2.5):
    platform = tmp_path / "platform.xml"
    platform.write_text(text)
    burst = tmp_path / "burst.json"
    burst.write_text(json.dumps(generators.burst(jobs, delay)))
    return platform, burst


@pytest.mark.batsim
@pytest.mark.parametrize("name", sorted(NET_PLATFORMS))
def test_timers_within_a_replys_network_time_are_asked_for_after_it(tmp_path, subprocess_env, name):
    """Every sleep after a binding (1 µs to 3 ms) ends before Batsim has applied the
    reply that carries the binding: the broker asks for a time after it, the run ends,
    and real Batsim agrees byte for byte."""
    text, seed = NET_PLATFORMS[name]
    platform, burst = _platform_and_burst(tmp_path, text)
    scheduler = f"python {JITTERY} {seed}"
    ours = _run(subprocess_env, tmp_path, "embedded", scheduler, platform, burst)
    real = _run(
        subprocess_env,
        tmp_path,
        "real",
        scheduler,
        platform,
        burst,
        "--batsim",
        str(batsim_or_skip()),
    )
    jobs = (ours / "out_jobs.csv").read_bytes()
    assert jobs == (real / "out_jobs.csv").read_bytes()
    assert jobs.count(b"COMPLETED_SUCCESSFULLY") == 12


@pytest.mark.parametrize(
    ("mode", "extra", "jobs", "delay"),
    [
        (
            "lockstep",
            ("--base-simulation-timestep", "100us", "--max-simulation-timestep", "100us"),
            32,
            2.5,
        ),
        ("realtime", ("--speed", "0.1"), 32, 0.05),
    ],
    ids=["lockstep", "realtime"],
)
def test_the_free_running_modes_ask_for_their_calls_after_the_replys_network_time(
    tmp_path, subprocess_env, mode, extra, jobs, delay
):
    """Lockstep asks for its next timestep (here 100 µs), realtime for its next step (0.5
    ms of virtual time at speed 0.1): both fell within the network time of replies on a
    16-host cluster with a backbone (600 µs per message), and Batsim refused the call."""
    platform, burst = _platform_and_burst(tmp_path, cluster(16), jobs, delay)
    out = _run(
        subprocess_env,
        tmp_path,
        mode,
        f"python {JITTERY} 1",
        platform,
        burst,
        "--mode",
        mode,
        *extra,
    )
    assert (out / "out_jobs.csv").read_bytes().count(b"COMPLETED_SUCCESSFULLY") == jobs


# --------------------------------------------------------------------------- 3. the rule, seeded


def _calling_fcfs(transit: p.ReplyTransit, seed: int):  # type: ignore[no-untyped-def]
    """The project's FCFS, and in most replies a CALL_ME_LATER after its decisions for a
    seeded deadline 1 µs to 10 ms ahead, asked as the broker asks: no earlier than
    ``earliest_call`` for this platform."""
    fcfs = Fcfs()
    rng = random.Random(seed)

    def decide(raw: str) -> str:
        message = p.decode(raw, "batsim")
        reply = fcfs(message)
        ends = any(isinstance(e.data, p.SimulationEnds) for e in message.events)
        if not ends and rng.random() < 0.7:
            t = reply.now
            deadline = t + rng.choice([1e-6, 5e-5, 2e-4, 6e-4, 1.3e-3, 3e-3, 1e-2])
            when = max(deadline, p.earliest_call(t, len(reply.events), transit))
            reply = p.Message(t, [*reply.events, p.Event(t, p.CallMeLater(when))])
        return p.encode(reply)

    return decide


def _late_replying_fcfs(transit: p.ReplyTransit, seed: int):  # type: ignore[no-untyped-def]
    """The FCFS replying as lockstep and realtime do: stamped later than the message (0
    to 50 ms), its decisions stamped then, and a call placed as ``free_running_call``
    places it, for a seeded time 1 µs to 10 ms after the reply's stamp."""
    fcfs = Fcfs()
    rng = random.Random(seed)

    def decide(raw: str) -> str:
        message = p.decode(raw, "batsim")
        decided = fcfs(message)
        if any(isinstance(e.data, p.SimulationEnds) for e in message.events):
            return p.encode(decided)
        now = message.now + rng.choice([0.0, 2e-6, 3e-4, 1e-3, 5e-3, 2e-2, 5e-2])
        events = [p.Event(now, e.data) for e in decided.events]
        if rng.random() < 0.7:
            wanted = now + rng.choice([1e-6, 5e-5, 2e-4, 6e-4, 1.3e-3, 3e-3, 1e-2])
            when, stamp, first = p.free_running_call(message.now, now, len(events), wanted, transit)
            call = p.Event(stamp, p.CallMeLater(when))
            events = [call, *events] if first else [*events, call]
        return p.encode(p.Message(now, events))

    return decide


def _seeded_case(seed: int) -> tuple[str, tuple[str, ...], int]:
    """A platform with a network (one of tests/netplatforms.py's, or a seeded random
    one), its flags, and how many compute hosts it has."""
    if seed % 3 == 0:
        name = sorted(PLATFORMS)[seed // 3 % len(PLATFORMS)]
        text, flags = PLATFORMS[name]
        nodes = {"master inside a cluster": 5, "cluster of 8, master cluster, backbone": 8,
                 "floyd, router, three sharing policies": 2, "dijkstra": 2}.get(name, 3)  # fmt: skip
        return text, flags, nodes
    text, nodes = random_platform(seed)
    return text, (), nodes


def _transit(folder: Path, flags: tuple[str, ...]) -> p.ReplyTransit:
    master = flags[flags.index("-m") + 1] if "-m" in flags else "master_host"
    return load_platform(folder / "platform.xml", master).reply_transit()


@pytest.mark.parametrize("seed", range(45))
def test_calls_asked_by_the_rule_are_accepted_on_seeded_platforms_with_a_network(tmp_path, seed):
    """Seeded platforms (latencies from 1.5 µs to 2 ms, shared, FATPIPE and split-duplex
    links, clusters, zones) and workloads with same-instant submissions: no call asked
    at ``earliest_call`` is refused, however close its deadline."""
    text, flags, nodes = _seeded_case(seed)
    sc = FixedScenario(text, [workload(seed, nodes, 40)], flags)
    sc.write(tmp_path)
    sent, end = run_embedded(sc, 0, tmp_path, decide=_calling_fcfs(_transit(tmp_path, flags), seed))
    assert end == "SIMULATION_ENDS", end


@pytest.mark.parametrize("seed", range(30))
def test_calls_of_replies_stamped_later_than_the_message_are_accepted(tmp_path, seed):
    """Lockstep and realtime stamp their replies later than the message: Batsim sleeps
    until then, and what other actors send meanwhile goes first (realtime's first reply
    on a 16-host cluster: the submitter's hello, 600 µs, took the server before the call
    and Batsim refused it). The call goes first, stamped with the message's time."""
    text, flags, nodes = _seeded_case(seed)
    sc = FixedScenario(text, [workload(seed, nodes, 40)], flags)
    sc.write(tmp_path)
    decide = _late_replying_fcfs(_transit(tmp_path, flags), seed)
    sent, end = run_embedded(sc, 0, tmp_path, decide=decide)
    assert end == "SIMULATION_ENDS", end


def _wave_scenario(tmp_path: Path) -> FixedScenario:
    """16 jobs of 10 s started by one reply on a 16-host cluster (600 µs per message to
    the master from itself, 1.6 ms from a host), and one more submitted just before they
    end: the reply to that submission is stamped 5 ms later, while the 16 completions
    queue at Batsim's server, 1.6 ms each."""
    jobs = [{"id": str(i), "subtime": 0, "res": 1, "profile": "d10"} for i in range(16)]
    jobs.append({"id": "late", "subtime": 9.999, "res": 1, "profile": "d10"})
    wl = {"nb_res": 16, "jobs": jobs, "profiles": {"d10": {"type": "delay", "delay": 10}}}
    sc = FixedScenario(cluster(16), [wl])
    sc.write(tmp_path)
    return sc


def _late_caller(transit: p.ReplyTransit):  # type: ignore[no-untyped-def]
    """The FCFS replying 5 ms after each message, as a free-running mode does, with a call
    for 1 µs after its reply (until t = 30 s)."""
    fcfs = Fcfs()

    def decide(raw: str) -> str:
        message = p.decode(raw, "batsim")
        decided = fcfs(message)
        if message.now > 30 or any(isinstance(e.data, p.SimulationEnds) for e in message.events):
            return p.encode(decided)
        now = message.now + 5e-3
        events = [p.Event(now, e.data) for e in decided.events]
        when, stamp, first = p.free_running_call(message.now, now, len(events), now + 1e-6, transit)
        call = p.Event(stamp, p.CallMeLater(when))
        return p.encode(p.Message(now, [call, *events] if first else [*events, call]))

    return decide


def test_a_late_replys_call_goes_ahead_of_the_completions_queued_meanwhile(tmp_path):
    """Placed last and stamped with the reply's time, the call waited behind the wave of
    completions that queued while Batsim slept until that time, and was refused (10.0226
    s for a call at 10.019); first, stamped with the message's time, it is not."""
    sc = _wave_scenario(tmp_path)
    transit = _transit(tmp_path, ())
    sent, end = run_embedded(sc, 0, tmp_path, decide=_late_caller(transit))
    assert end == "SIMULATION_ENDS", end


@pytest.mark.batsim
def test_real_batsim_takes_a_late_replys_call_ahead_of_the_queued_completions(tmp_path):
    sc = _wave_scenario(tmp_path)
    transit = _transit(tmp_path, ())
    real, real_end = run_real(sc, 0, tmp_path, decide=_late_caller(transit))
    ours, our_end = run_embedded(sc, 0, tmp_path, decide=_late_caller(transit))
    assert real_end == our_end == "SIMULATION_ENDS", (real_end, our_end)
    assert len(real) == len(ours)


@pytest.mark.batsim
@pytest.mark.parametrize("seed", [1, 3, 4, 6, 12])
def test_real_batsim_accepts_the_calls_the_rule_asks_for(tmp_path, seed):
    text, flags, nodes = _seeded_case(seed)
    sc = FixedScenario(text, [workload(seed, nodes, 40)], flags)
    sc.write(tmp_path)
    transit = _transit(tmp_path, flags)
    real, real_end = run_real(sc, 0, tmp_path, decide=_calling_fcfs(transit, seed))
    ours, our_end = run_embedded(sc, 0, tmp_path, decide=_calling_fcfs(transit, seed))
    assert real_end == our_end == "SIMULATION_ENDS", (real_end, our_end)
    assert len(real) == len(ours)


def test_without_a_network_the_rule_is_unchanged(tmp_path):
    """Link-free platforms (and Batkube's graphene, whose master's messages cross
    SimGrid's loopback and routes of no link): the 1e-10 s per event of before, to the
    bit, so their runs stay byte-identical."""
    data = shared_data_dir()
    paths = [ROOT / "examples/inputs/cluster16.xml"]
    if data is not None:
        paths.append(data / "batkube/platforms/platform_graphene_16nodes.xml")
    for path in paths:
        assert load_platform(path).reply_transit() == p.NO_NETWORK
    for now, events in [(0.0, 0), (820.0106, 1), (0.333333, 7), (86400.000001, 3)]:
        before = (p.instant_end_ns(now) + 1) / 1e9 + (events + 1) * 1e-10
        assert p.earliest_call(now, events) == before
