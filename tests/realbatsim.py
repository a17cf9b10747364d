"""Real Batsim 4.2.1 beside the embedded simulator, for the tests that compare them.

``BATSIM`` is the binary of ``../shared/tools/batsim-4.2.1`` (``$TIMEWARP_BATSIM`` to use
another). :func:`batsim_or_skip` gives it, or skips the test with the reason — and fails
it instead under CI (``CI=true``), where the binary is part of the setup.

The differential harness: :func:`scenario` makes a seeded random input (platform,
workloads, flags) and :class:`Chaos` a seeded decision process whose every decision is a
function of the messages it was sent (job starts, rejections, kills, CALL_ME_LATER from
1 µs to 170 s ahead, replies stamped later than the request, dynamic jobs and profiles,
metadata); :func:`run_real` and :func:`run_embedded` drive the two simulators with it and
return the messages each sent. Same inputs, same decisions: the messages must be the same.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zmq
from procset import ProcSet

from simulator import protocol as p
from simulator.engine import Deadlock, DecisionError
from simulator.testing import ROOT, free_endpoint, make_sim

BATSIM_DIR = ROOT.parent / "shared" / "tools" / "batsim-4.2.1"
BATSIM = Path(os.environ.get("TIMEWARP_BATSIM") or BATSIM_DIR / "bin" / "batsim")


def batsim_problem(path: Path = BATSIM) -> str | None:
    """Why real Batsim cannot run here, or None."""
    if not path.exists():
        return f"real Batsim is not at {path}"
    try:
        run = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        return f"{path} does not start: {exc}"
    if run.returncode != 0 or run.stdout.strip() != "4.2.1":
        first = (run.stderr or run.stdout).strip().splitlines()[:1]
        return (
            f"{path} does not run ({first[0] if first else f'exit {run.returncode}'}): its "
            f"run-time packages are missing ({BATSIM_DIR / 'README.md'}; scripts/test.sh "
            "installs them)"
        )
    return None


def batsim_or_skip() -> Path:
    problem = batsim_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{problem} — under CI the real-Batsim tests must run, not skip")
        pytest.skip(problem)
    return BATSIM


# --------------------------------------------------------------------------- inputs


@dataclass
class Scenario:
    nodes: int
    workloads: list[dict[str, Any]]
    sharing: bool
    dynamic: bool
    profile_reuse: bool

    def flags(self) -> list[str]:
        return (
            ["--enable-compute-sharing"] * self.sharing
            + ["--enable-dynamic-jobs"] * self.dynamic
            + ["--enable-profile-reuse"] * self.profile_reuse
        )

    def write(self, folder: Path) -> tuple[Path, list[Path]]:
        folder.mkdir(parents=True, exist_ok=True)
        platform = folder / "platform.xml"
        platform.write_text(platform_xml(self.nodes))
        paths = []
        for index, workload in enumerate(self.workloads):
            path = folder / f"w{index}.json"
            path.write_text(json.dumps(workload))
            paths.append(path)
        return platform, paths


def platform_xml(nodes: int) -> str:
    """Like `timewarp workload platform`'s: no links, the master named master_host."""
    hosts = ['<host id="master_host" speed="1Gf"/>'] + [
        f'<host id="node{i:02d}" speed="1Gf"><prop id="core" value="1"/></host>'
        for i in range(nodes)
    ]
    return (
        '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
        '<platform version="4.1"><zone id="z" routing="Full">'
        + "".join(hosts)
        + "</zone></platform>\n"
    )


def scenario(seed: int) -> Scenario:
    """Jobs sharing subtimes (integers, 1/3 s, 7.0000001 s), delays from 1 µs to 170 s,
    walltimes, parallel and composed profiles (not shared: real Batsim divides a host's
    speed between parallel tasks, the embedded simulator does not), one or two workloads,
    compute sharing, dynamic jobs and profile reuse or not."""
    rng = random.Random(seed)
    nodes = rng.randint(1, 6)
    sharing = rng.random() < 0.5
    dynamic = rng.random() < 0.5
    profile_reuse = dynamic and rng.random() < 0.5
    subtimes = [0, 0, 0, 1, 2, 5, 10, 10, 12.5, 100, 0.3333333333, 7.0000001]
    jobs = []
    for i in range(rng.randint(1, 25)):
        job: dict[str, Any] = {
            "id": str(i + 1),
            "subtime": rng.choice(subtimes) + rng.choice([0, 0, 0, rng.randint(0, 300)]),
            "res": rng.randint(1, nodes),
            "profile": rng.choice("abcd"),
        }
        if rng.random() < 0.2:
            job["walltime"] = rng.choice([1, 5, 50, 200])
        if not sharing and rng.random() < 0.25:
            job["profile"] = rng.choice(["ph", "seq"])
        jobs.append(job)
    profiles: dict[str, Any] = {
        "a": {"type": "delay", "delay": 10},
        "b": {"type": "delay", "delay": 170},
        "c": {"type": "delay", "delay": rng.choice([0.5, 3.3333333, 1e-6, 2])},
        "d": {"type": "delay", "delay": 60},
        "ph": {"type": "parallel_homogeneous", "cpu": rng.choice([1e9, 2.5e9]), "com": 0},
        "seq": {"type": "composed", "repeat": rng.choice([1, 2]), "seq": ["c", "ph"]},
    }
    split = [jobs]
    if rng.random() < 0.3:
        half = len(jobs) // 2
        split = [jobs[:half] or jobs[:1], jobs[half:]]
    workloads = []
    for part in split:
        mine = dict(profiles)
        if not any(job["profile"] == "seq" for job in part):
            # an unused composed profile: which of its parts Batsim keeps depends on its
            # hash table's order (a documented difference)
            del mine["seq"]
        workloads.append({"nb_res": nodes, "jobs": part, "profiles": mine})
    return Scenario(nodes, workloads, sharing, dynamic, profile_reuse)


# --------------------------------------------------------------------------- decisions


def canonical(raw: str | bytes) -> str:
    """A message as the decision process reads it: times at Batsim's precision (the
    embedded simulator's JSON writes ``170.0`` where Batsim writes ``170.000000``)."""
    message = json.loads(raw)
    return json.dumps(
        [
            p.wire_time(message["now"]),
            [
                [p.wire_time(e["timestamp"]), e["type"], p.wire_value(e.get("data", {}))]
                for e in message["events"]
            ],
        ],
        sort_keys=True,
    )


def _without_folder(raw: str | bytes) -> str:
    """:func:`canonical`, with SIMULATION_BEGINS's workload paths cut to their file names:
    the decisions drawn from a message must not depend on the folder a test runs in."""
    message = json.loads(raw)
    for event in message["events"]:
        if event["type"] == "SIMULATION_BEGINS":
            workloads = event["data"]["workloads"]
            for name, where in workloads.items():
                workloads[name] = Path(where).name
    return canonical(json.dumps(message))


class Chaos:
    """A decision process deciding at random from the messages it was sent (the random
    generator is seeded with the message's text, so equal messages get equal replies)."""

    def __init__(self, seed: int, sc: Scenario) -> None:
        self.seed, self.nodes, self.sharing, self.dynamic = seed, sc.nodes, sc.sharing, sc.dynamic
        self.queue: list[str] = []
        self.running: dict[str, list[int]] = {}
        self.res: dict[str, int] = {}
        self.used = [0] * sc.nodes
        self.calls = self.index = self.submitted = self.ended = self.registered = 0
        self.no_more_static = self.finished = False

    def __call__(self, raw: str | bytes) -> str:
        message = json.loads(raw)
        self.index += 1
        rng = random.Random(f"{self.seed}:{self.index}:{_without_folder(raw)}")
        now = message["now"]
        for event in message["events"]:
            kind, data = event["type"], event.get("data", {})
            if kind == "JOB_SUBMITTED":
                self.queue.append(data["job_id"])
                self.res[data["job_id"]] = data["job"]["res"]
                self.submitted += not data["job_id"].startswith("dyn!")
            elif kind == "JOB_COMPLETED":
                self.ended += 1
                for host in self.running.pop(data["job_id"], []):
                    self.used[host] -= 1
            elif kind == "REQUESTED_CALL":
                self.calls -= 1
            elif kind == "NOTIFY" and data["type"] == "no_more_static_job_to_submit":
                self.no_more_static = True
            elif kind == "SIMULATION_ENDS":
                return json.dumps({"now": now, "events": []})
        reply_now = now
        if rng.random() < 0.1:
            reply_now = now + rng.choice([1e-6, 3e-6, 2.5e-5, 0.5, 1.25])
        out: list[dict[str, Any]] = []
        stamp = now

        def event(kind: str, data: dict[str, Any]) -> None:
            nonlocal stamp
            if rng.random() < 0.2 and reply_now > now:
                stamp = min(reply_now, stamp + rng.random() * (reply_now - stamp))
            out.append({"timestamp": stamp, "type": kind, "data": data})

        waiting = []
        for job_id in self.queue:
            draw = rng.random()
            free = [h for h in range(self.nodes) if self.sharing or self.used[h] == 0]
            if draw < 0.04:
                event("REJECT_JOB", {"job_id": job_id})
                self.ended += 1
            elif draw < 0.9 and len(free) >= self.res[job_id]:
                hosts = sorted(rng.sample(free, self.res[job_id]))
                for host in hosts:
                    self.used[host] += 1
                self.running[job_id] = hosts
                event("EXECUTE_JOB", {"job_id": job_id, "alloc": str(ProcSet(*hosts))})
            else:
                waiting.append(job_id)
        self.queue = waiting
        if self.running and rng.random() < 0.05:
            event("KILL_JOB", {"job_ids": [rng.choice(sorted(self.running))]})
        if self.dynamic and not self.finished and not self.no_more_static and rng.random() < 0.15:
            self.registered += 1
            job_id = f"dyn!r{self.registered}"
            if self.registered == 1:
                profile = {"type": "delay", "delay": rng.choice([3, 5.5])}
                event("REGISTER_PROFILE", {"workload_name": "dyn", "profile_name": "p",
                                           "profile": profile})  # fmt: skip
            job = {"id": job_id, "subtime": round(stamp, 6), "res": 1, "profile": "p"}
            event("REGISTER_JOB", {"job_id": job_id, "job": job})
            self.submitted += 1
            self.queue.append(job_id)
            self.res[job_id] = 1
        if self.running and rng.random() < 0.1:
            event("SET_JOB_METADATA", {"job_id": sorted(self.running)[0], "metadata": "m"})
        if rng.random() < 0.25 or (self.queue and not self.running and self.calls == 0):
            self.calls += 1
            ahead = rng.choice([1e-6, 2e-6, 9e-6, 1.2e-5, 0.001, 0.3333333333, 1, 7.5, 170])
            out.append({"timestamp": stamp, "type": "CALL_ME_LATER",
                        "data": {"timestamp": max(reply_now, stamp) + ahead}})  # fmt: skip
        if (
            self.dynamic
            and self.no_more_static
            and not self.finished
            and self.ended >= self.submitted
            and not self.queue
            and not self.running
        ):
            self.finished = True
            out.append({"timestamp": stamp, "type": "NOTIFY",
                        "data": {"type": "registration_finished"}})  # fmt: skip
        return json.dumps({"now": reply_now, "events": out})


# --------------------------------------------------------------------------- runs


def run_real(
    sc: Scenario,
    seed: int,
    folder: Path,
    decide=None,
    extra: tuple[str, ...] = (),
    program: list[str] | None = None,
) -> tuple[list[str], str]:
    """Real Batsim on the scenario (``decide``: a decision function of the raw message,
    default :class:`Chaos`): the messages it sent, and how it ended ("SIMULATION_ENDS" or
    its exit). ``program``: another simulator's command taking Batsim's flags (`timewarp
    sim`), run the same way over ZeroMQ TCP."""
    platform, workloads = sc.write(folder)
    decide = decide or Chaos(seed, sc)
    context = zmq.Context.instance()
    sock = context.socket(zmq.REP)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    prefix = folder / ("real" if program is None else "program")
    argv = [*(program or [str(batsim_or_skip())]), "-p", str(platform), "-e", str(prefix),
            "-s", f"tcp://127.0.0.1:{port}", *sc.flags(), *extra]  # fmt: skip
    for path in workloads:
        argv += ["-w", str(path)]
    sent: list[str] = []
    with open(folder / "batsim.log", "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    end = ""
    try:
        waited = 0
        while not end:
            if not sock.poll(100):  # Batsim aborts on a decision it refuses
                waited += 100
                if proc.poll() is not None or waited > 60_000:
                    end = f"exit {proc.poll()}"
                continue
            waited = 0
            raw = sock.recv().decode()
            sent.append(raw)
            sock.send_string(decide(raw))
            if '"SIMULATION_ENDS"' in raw:
                end = "SIMULATION_ENDS"
            elif proc.poll() is not None:
                end = f"exit {proc.returncode}"
    finally:
        sock.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return sent, end


def run_embedded(sc: Scenario, seed: int, folder: Path, decide=None) -> tuple[list[str], str]:
    """The embedded simulator on the same scenario: the messages it sent, and how it
    ended ("SIMULATION_ENDS" or the error it stopped with)."""
    platform, workloads = sc.write(folder)
    decide = decide or Chaos(seed, sc)
    master = sc.flags()[sc.flags().index("-m") + 1] if "-m" in sc.flags() else "master_host"
    sim = make_sim(platform, workloads, master, allow_compute_sharing=sc.sharing,
                   dynamic_jobs=sc.dynamic, profile_reuse=sc.profile_reuse)  # fmt: skip
    sent: list[str] = []
    try:
        message = sim.first_message()
        while True:
            raw = p.encode(message)
            sent.append(raw)
            reply = decide(raw)
            if sim.ended:
                return sent, "SIMULATION_ENDS"
            message = sim.handle_reply(p.decode(reply, "decision"))
    except (Deadlock, DecisionError) as exc:
        return sent, f"error: {exc}"


class FixedScenario(Scenario):
    """A scenario of given texts: a platform file's text as it is (prolog included) and
    workloads, for inputs written by hand (links, routes, clusters)."""

    def __init__(self, platform: str, workloads: list[dict[str, Any]], flags: tuple[str, ...] = ()):
        super().__init__(0, workloads, "--enable-compute-sharing" in flags,
                         "--enable-dynamic-jobs" in flags, "--enable-profile-reuse" in flags)  # fmt: skip
        self.platform_text = platform
        self.extra_flags = [f for f in flags if f not in Scenario.flags(self)]

    def flags(self) -> list[str]:
        return super().flags() + self.extra_flags

    def write(self, folder: Path) -> tuple[Path, list[Path]]:
        folder.mkdir(parents=True, exist_ok=True)
        platform = folder / "platform.xml"
        platform.write_text(self.platform_text)
        paths = []
        for index, workload in enumerate(self.workloads):
            path = folder / f"w{index}.json"
            path.write_text(json.dumps(workload))
            paths.append(path)
        return platform, paths


def fcfs_decider():  # type: ignore[no-untyped-def]
    """The project's FCFS as a decision function of the raw message."""
    from simulator.fcfs import Fcfs

    decide = Fcfs()
    return lambda raw: p.encode(decide(p.decode(raw, "batsim")))


def run_pair(batsim, tmp_path, env, platform_text, wl, decision, flags=()):  # type: ignore[no-untyped-def]
    """The batsim binary and `timewarp sim` on the same files, each against a fresh
    decision process (``decision``: its argv, given the endpoint); their jobs CSVs."""
    platform = tmp_path / "platform.xml"
    platform.write_text(platform_text)
    work = tmp_path / "w.json"
    work.write_text(json.dumps(wl))
    out = {}
    for who, program in (
        ("real", [str(batsim)]),
        ("ours", [sys.executable, "-m", "timewarp", "sim", "-q"]),
    ):
        endpoint = free_endpoint()
        folder = tmp_path / who
        folder.mkdir()
        log_path = folder / "decision.log"  # a file: a pipe nobody reads fills up
        with open(log_path, "w") as log_file:
            proc = subprocess.Popen(
                decision(endpoint), env=env, cwd=folder, stdout=log_file,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            sim = subprocess.run(
                [*program, "-p", str(platform), "-w", str(work), "-e", str(folder / "out"),
                 "-s", endpoint, *flags],
                env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert sim.returncode == 0, (who, sim.stdout[-2000:], sim.stderr[-2000:])
        assert proc.returncode == 0, (who, log_path.read_text()[-3000:])
        out[who] = (folder / "out_jobs.csv").read_bytes()
    return out["real"], out["ours"]


#: schedule.csv's wall-clock columns (real seconds, not simulated), left out of comparisons
WALL_CLOCK_KEYS = ("batsim_version", "scheduling_time", "simulation_time")


def differing_outputs(folder: Path, kinds: tuple[str, ...]) -> list[str]:
    """After :func:`run_pair`: which of ``out_KIND.csv`` differ between ``folder/real`` and
    ``folder/ours`` (schedule.csv without its wall-clock columns)."""
    differ = []
    for kind in kinds:
        texts = [(folder / who / f"out_{kind}.csv").read_text() for who in ("real", "ours")]
        if kind == "schedule":
            rows = [[line.split(",") for line in text.splitlines()] for text in texts]
            texts = [
                str([(k, v) for k, v in zip(*r, strict=True) if k not in WALL_CLOCK_KEYS])
                for r in rows
            ]
        if texts[0] != texts[1]:
            differ.append(kind)
    return differ
