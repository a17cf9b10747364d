"""Clock benchmark: what virtual time costs a program.

Prints, in one run: now() cost (cached and round trip) next to time.time(), sleep->wake
latency, timers fired per second for 1/10/100 threads (deadlines aligned, so one
advance wakes every thread, and staggered, so each timer is its own advance), and the
wall time of the simulated day of `examples/ticking_day.py` as a user runs it (the whole
`timewarp run --standalone` command: interpreter start-ups and the import hook included).

    .venv/bin/python benchmarks/clock.py [--repeat 3] [--frames]

The last rows are the cost of decoding and checking one clock frame of each frequent
kind, in this process (``--frames``: those rows only, in a few seconds).

Each figure is measured inside a program run by `timewarp run --standalone`; wall times
are real (perf_counter). With --repeat N, min/median/max over N runs are shown (the
machine's noise).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time as real
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(kind: str, threads: int, iterations: int) -> dict:
    from timewarp import vtime

    if kind == "now":
        n = iterations
        t0 = real.perf_counter()
        for _ in range(n):
            vtime.time()
        return {"per_call_us": (real.perf_counter() - t0) / n * 1e6}
    if kind == "sleep":
        t0 = real.perf_counter()
        for _ in range(iterations):
            vtime.sleep(1)
        return {"per_sleep_us": (real.perf_counter() - t0) / iterations * 1e6}
    if kind in ("aligned", "staggered"):

        def worker(i: int) -> None:
            period = 1.0 if kind == "aligned" else 1.0 + i * 1e-6
            for _ in range(iterations):
                vtime.sleep(period)

        ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
        t0 = real.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = real.perf_counter() - t0
        return {"timers_per_s": threads * iterations / wall, "wall_s": wall}
    raise SystemExit(f"unknown kind {kind}")


def measure(kind: str, threads: int, iterations: int, roundtrip: bool = False) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if roundtrip:
        env["TIMEWARP_NOW"] = "roundtrip"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "timewarp",
            "run",
            "--standalone",
            "--no-import-hook",
            "-q",
            "--",
            sys.executable,
            __file__,
            "--child",
            kind,
            str(threads),
            str(iterations),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def simulated_day() -> float:
    """Wall seconds of `timewarp run --standalone -- python examples/ticking_day.py`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = real.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "timewarp", "run", "--standalone", "-q", "--",
         "python", str(ROOT / "examples" / "ticking_day.py")],
        env=env, capture_output=True, check=True,
    )  # fmt: skip
    return real.perf_counter() - t0


def frame_rows(repeat: int) -> list[tuple[str, list[float], str]]:
    """µs to decode and check one frame of each frequent kind (timewarp/wire/clockproto.py)."""
    from timewarp.wire import clockproto as cp

    io = [[53412 + i, 310 * i, 2048 * i, i + 1] for i in range(4)]
    frames = [
        ("state report, 4 API connections", cp.decode_to_broker, cp.state(False, 12, io, 0, 3, 0)),
        ("timer", cp.decode_to_broker, cp.timer(3, 60_000_000_000, [0, 2, 5])),
        ("fire (in the runtime)", cp.decode_to_runtime, cp.fire([3, 9], 60_000_000_000)),
        (
            "io release (in the runtime)",
            cp.decode_to_runtime,
            cp.io_release([row[:2] for row in io[:2]], 6_000),
        ),
    ]
    rows = []
    for name, decode, msg in frames:
        frame, n, values = cp.encode(msg), 50_000, []
        for _ in range(repeat):
            t0 = real.perf_counter()
            for _ in range(n):
                decode(frame)
            values.append((real.perf_counter() - t0) / n * 1e6)
        rows.append((f"clock frame decoded and checked: {name}", values, "µs/frame"))
    return rows


def fmt(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:,.2f}"
    return f"{min(values):,.2f} / {statistics.median(values):,.2f} / {max(values):,.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--frames", action="store_true", help="only the clock frames' cost")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, threads, iterations = args.child
        print(json.dumps(child(kind, int(threads), int(iterations))))
        return
    if args.frames:
        show(frame_rows(args.repeat), args.repeat)
        return

    rows: list[tuple[str, list[float], str]] = []
    base = []
    for _ in range(args.repeat):
        n = 200_000
        t0 = real.perf_counter()
        for _ in range(n):
            real.time()
        base.append((real.perf_counter() - t0) / n * 1e6)
    rows.append(("time.time() (real, for reference)", base, "µs/call"))
    rows.append(
        (
            "now() cached (deterministic mode)",
            [measure("now", 1, 200_000)["per_call_us"] for _ in range(args.repeat)],
            "µs/call",
        )
    )
    rows.append(
        (
            "now() round trip to the broker",
            [measure("now", 1, 5_000, roundtrip=True)["per_call_us"] for _ in range(args.repeat)],
            "µs/call",
        )
    )
    rows.append(
        (
            "sleep(1) -> wake, one thread",
            [measure("sleep", 1, 2_000)["per_sleep_us"] for _ in range(args.repeat)],
            "µs/sleep",
        )
    )
    for kind in ("aligned", "staggered"):
        for threads in (1, 10, 100):
            iterations = max(20, 2_000 // threads)
            values = [
                measure(kind, threads, iterations)["timers_per_s"] for _ in range(args.repeat)
            ]
            rows.append((f"timers fired, {threads} threads, {kind} deadlines", values, "timers/s"))

    rows.append(
        (
            "simulated day, examples/ticking_day.py (whole command)",
            [simulated_day() for _ in range(args.repeat)],
            "s",
        )
    )
    show(rows + frame_rows(args.repeat), args.repeat)


def show(rows: list[tuple[str, list[float], str]], repeat: int) -> None:
    width = max(len(r[0]) for r in rows)
    label = "value" if repeat == 1 else "min / median / max"
    print(f"{'measure'.ljust(width)}  {label}")
    for name, values, unit in rows:
        print(f"{name.ljust(width)}  {fmt(values)} {unit}")
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\n{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {repeat} runs each, load {load}"
    )


if __name__ == "__main__":
    main()
