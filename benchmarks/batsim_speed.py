"""Speed and memory of `timewarp sim` against real Batsim 4.2.1, side by side.

    .venv/bin/python benchmarks/batsim_speed.py                   # 100,000 jobs, ~10 min
    .venv/bin/python benchmarks/batsim_speed.py --jobs 20000 --skip-real
    .venv/bin/python benchmarks/batsim_speed.py --cpus 0          # every process on CPU 0
    .venv/bin/python benchmarks/batsim_speed.py --cluster --hosts 512 --jobs 20000 --rate 0.77

Issue 14's input: 100,000 one-host jobs on 1,000 one-core hosts, Poisson arrivals at 1.5
jobs/s, exponential run times of mean 600 s (whole seconds): 90 % of the platform busy on
average. The decision process is the project's FCFS (``python -m simulator.fcfs``, the
reference decision process of the conformance tests) in its own process over ZeroMQ/TCP,
the same for both simulators, which run with the same flags. For each: wall time from
spawn to exit, peak resident memory of the simulator and of the decision process
(``/proc/PID/status``, sampled every 0.2 s), the makespan from ``schedule.csv``. For
`timewarp sim` also its resident memory against the number of jobs ended (its progress
lines), to show it stays flat. Last, the transport floors: as many ZeroMQ/TCP round trips
as `timewarp sim` exchanged, between two processes that do no other work, the requester
being `timewarp sim`'s own REQ side (ZMTP over a plain socket, ``simulator.zmtp``) then
libzmq's REQ socket (what Batsim uses): no simulator with that REQ side can beat its floor
with this protocol on this machine at this load. Goals: `timewarp sim` +
FCFS ≤ 45 s and ≤ 250 MiB, ≥ 10× faster than real Batsim.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from experiments._common import load_average, print_table  # noqa: E402
from simulator import generators  # noqa: E402

BATSIM = Path(  # $TIMEWARP_BATSIM: another binary (a worktree is one folder deeper)
    os.environ.get("TIMEWARP_BATSIM")
    or REPO.parent / "shared" / "tools" / "batsim-4.2.1" / "bin" / "batsim"
)
PROGRESS = re.compile(r"(\d+)/(\d+) jobs ended")
DONE = re.compile(r"(\d+) messages in")

# The transport floor: the same number of REQ/REP round trips over ZeroMQ/TCP between two
# Python processes that do nothing else (a message and a reply of the usual sizes).
_ECHO = """
import sys, time, zmq
role, endpoint, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
MESSAGE = b'{"now":1234.567,"events":[' + b" " * 140 + b"]}"
context = zmq.Context()
if role == "rep":
    socket = context.socket(zmq.REP)
    socket.bind(endpoint)
    for _ in range(count):
        socket.send(socket.recv()[:90])
    socket.close(linger=0)
elif role == "req":
    socket = context.socket(zmq.REQ)
    socket.connect(endpoint)
    for _ in range(count):
        socket.send(MESSAGE)
        socket.recv()
    socket.close(linger=0)
else:  # timewarp sim's own REQ side: ZMTP over a plain socket (simulator.zmtp)
    from simulator.zmtp import ReqSocket
    plain = ReqSocket(endpoint)
    while not plain.connected:
        try:
            plain.connect(1.0)
        except OSError:  # the REP side does not listen yet
            time.sleep(0.01)
    for _ in range(count):
        plain.send(MESSAGE)
        plain.recv(None)
    plain.close()
context.term()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Result:
    name: str
    wall_s: float = 0.0
    cpu_sim_s: float = 0.0
    cpu_decision_s: float = 0.0
    peak_sim_mib: float = 0.0
    peak_decision_mib: float = 0.0
    makespan: float = 0.0
    messages: int = 0
    ok: bool = False
    memory_by_progress: list[tuple[int, float]] = field(default_factory=list)


def run(name: str, simulator: list[str], out: Path, env: dict[str, str], pin: list[str]) -> Result:
    port = _free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    result = Result(name)
    started = time.perf_counter()
    decision = subprocess.Popen(
        [*pin, sys.executable, "-m", "simulator.fcfs", f"tcp://127.0.0.1:{port}"],
        cwd=REPO, env=env,
    )  # fmt: skip
    sim = subprocess.Popen(
        [*pin, *simulator, "-s", endpoint], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            result.peak_sim_mib = max(result.peak_sim_mib, _rss_mib(sim.pid))
            result.peak_decision_mib = max(result.peak_decision_mib, _rss_mib(decision.pid))
            done.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert sim.stderr is not None
    for line in sim.stderr:
        match = PROGRESS.search(line)
        if match:
            result.memory_by_progress.append((int(match.group(1)), _rss_mib(sim.pid)))
        match = DONE.search(line)
        if match:
            result.messages = int(match.group(1))
    _, status, usage = os.wait4(sim.pid, 0)
    code = sim.returncode = os.waitstatus_to_exitcode(status)
    result.cpu_sim_s = usage.ru_utime + usage.ru_stime
    try:
        _, status, usage = os.wait4(decision.pid, 0)
        decision.returncode = os.waitstatus_to_exitcode(status)
        result.cpu_decision_s = usage.ru_utime + usage.ru_stime
    except ChildProcessError:
        decision.wait(60)
    result.wall_s = time.perf_counter() - started
    done.set()
    sampler.join()
    result.ok = code == 0 and decision.returncode == 0
    schedule = out.parent / f"{out.name}_schedule.csv"
    if schedule.exists():
        with open(schedule, newline="") as handle:
            result.makespan = float(next(csv.DictReader(handle))["makespan"])
    return result


def echo_floor(count: int, env: dict[str, str], pin: list[str], req: str = "req") -> Result:
    """``count`` round trips between two processes that only pass the bytes on: what
    ZeroMQ/TCP and the machine's scheduling cost alone (wall, CPU of each side). ``req``:
    the requester's side, libzmq's REQ socket (``req``) or timewarp sim's own (``plain``,
    :mod:`simulator.zmtp`); the replier is libzmq's REP socket."""
    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    name = "zmq echo (floor)" if req == "req" else "plain-socket echo (floor)"
    result = Result(name, messages=count)
    started = time.perf_counter()
    rep = subprocess.Popen(
        [*pin, sys.executable, "-c", _ECHO, "rep", endpoint, str(count)], env=env
    )
    req = subprocess.Popen([*pin, sys.executable, "-c", _ECHO, req, endpoint, str(count)], env=env)
    codes = []
    for proc, name in ((req, "cpu_sim_s"), (rep, "cpu_decision_s")):
        _, status, usage = os.wait4(proc.pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
        setattr(result, name, usage.ru_utime + usage.ru_stime)
    result.wall_s = time.perf_counter() - started
    result.ok = codes == [0, 0]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=1.5, help="arrivals per second")
    parser.add_argument("--mean-delay", type=float, default=600.0, help="mean run time (s)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-real", action="store_true", help="only timewarp sim")
    parser.add_argument(
        "--skip-floor", action="store_true", help="no ZeroMQ echo of the same message count"
    )
    parser.add_argument(
        "--cpus",
        metavar="LIST",
        help="run every process on these CPUs (taskset -c LIST, e.g. 0): a simulator and "
        "its decision process take turns, so one CPU is enough, and on a virtual machine "
        "waking a thread on another, idle CPU costs an interrupt through the hypervisor "
        "(default: wherever the kernel puts them)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="a platform with a network instead: Batsim's cluster512.xml shape with --hosts "
        "hosts (600 µs per message to the master; the simulator's network model at work)",
    )
    parser.add_argument("-o", "--output", help="keep inputs and outputs here")
    args = parser.parse_args(argv)
    pin = ["taskset", "-c", args.cpus] if args.cpus else []
    if not args.skip_real and not BATSIM.exists():
        parser.error(f"real Batsim is not at {BATSIM} (or use --skip-real)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory(prefix="batsim-speed-") as tmp:
        work = Path(args.output) if args.output else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        platform = work / "platform.xml"
        if args.cluster:
            platform.write_text(generators.cluster_platform(args.hosts))
        else:
            platform.write_text(generators.homogeneous_platform(args.hosts))
        workload = work / "workload.json"
        workload.write_text(
            json.dumps(generators.poisson(args.jobs, args.rate, args.mean_delay, seed=args.seed))
        )
        print(f"machine load before: {load_average()}", file=sys.stderr)
        inputs = ["-p", str(platform), "-w", str(workload)]
        results = [
            run(
                "timewarp sim",
                [sys.executable, "-m", "timewarp", "sim", *inputs, "-e", str(work / "tw")],
                work / "tw",
                env,
                pin,
            )
        ]
        if not args.skip_real:
            results.append(
                run(
                    "Batsim 4.2.1",
                    [str(BATSIM), *inputs, "-e", str(work / "real")],
                    work / "real",
                    env,
                    pin,
                )  # fmt: skip
            )
        if results[0].messages and not args.skip_floor:
            results.append(echo_floor(results[0].messages, env, pin, "plain"))
            results.append(echo_floor(results[0].messages, env, pin))
        print(f"machine load after: {load_average()}", file=sys.stderr)
    rows = [
        [r.name, "ok" if r.ok else "FAILED", f"{r.wall_s:.1f}", f"{r.cpu_sim_s:.1f}",
         f"{r.cpu_decision_s:.1f}", f"{r.peak_sim_mib:.0f}", f"{r.peak_decision_mib:.0f}",
         f"{r.peak_sim_mib + r.peak_decision_mib:.0f}", f"{r.makespan:.1f}"]
        for r in results
    ]  # fmt: skip
    print(
        f"{args.jobs} jobs on {args.hosts} hosts"
        + (" (a cluster with latency)" if args.cluster else "")
        + f", Poisson {args.rate}/s, mean {args.mean_delay} s"
        + (f", every process on CPU(s) {args.cpus}" if args.cpus else "")
    )
    print_table(
        ["simulator", "run", "wall (s)", "CPU simulator/REQ (s)", "CPU FCFS/REP (s)",
         "simulator peak RSS (MiB)", "FCFS peak RSS (MiB)", "sum (MiB)", "makespan (s)"],
        rows,
    )  # fmt: skip
    real = [r for r in results if r.name == "Batsim 4.2.1"]
    if real:
        print(f"\nspeed-up of timewarp sim: {real[0].wall_s / results[0].wall_s:.1f}x")
    for floor in results:
        if "echo" not in floor.name:
            continue
        print(
            f"transport floor, {floor.name.removesuffix(' (floor)')}: {floor.messages} REQ/REP round trips with no work take "
            f"{floor.wall_s:.1f} s ({floor.wall_s / floor.messages * 1e6:.0f} µs each)"
        )
        if real:  # a simulator that took no time at all would still wait for the transport
            print(
                f"so no simulator exchanging these messages with this decision process can be "
                f"more than {real[0].wall_s / floor.wall_s:.1f}x faster than Batsim here"
            )
    steps = results[0].memory_by_progress
    if steps:
        print("\ntimewarp sim resident memory against jobs ended:")
        picks = [steps[round(i * (len(steps) - 1) / 4)] for i in range(5)]
        print_table(["jobs ended", "RSS (MiB)"], [[n, f"{m:.0f}"] for n, m in picks])
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
