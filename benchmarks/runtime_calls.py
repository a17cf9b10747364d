"""What timewarp's runtime adds per call inside a scheduler process (issue 29).

    .venv/bin/python benchmarks/runtime_calls.py [--repeat 5] [--n 100000]

Each row is one call the patched program makes instead of the standard library's (or
one piece of the clock protocol's work), timed in this process in CPU time
(``process_time``), best of ``--repeat`` loops of ``--n`` calls, with the runtime in
deterministic mode holding the baton (no broker: nothing here blocks or hands the baton
on, so these are the calls' own Python costs, not the thread switches of a virtual wait).
"per pod" is the call's count per pod in a default_like run at 300 nodes × 3,000 pods
(cProfile's call counts, ``timewarp simulate --profile``, main c32327c) times its cost:
what the call adds to the scheduler process's CPU per pod.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from timewarp import vthreading, vtime  # noqa: E402
from timewarp._core import current, netio, selftime  # noqa: E402
from timewarp._core import runtime as _runtime  # noqa: E402
from timewarp._core.client import ClockClient  # noqa: E402
from timewarp.wire import clockproto  # noqa: E402

# calls per pod, default_like at 300 × 3,000 (cProfile's counts / 3,000 pods)
PER_POD = {
    "vtime.monotonic()": 12.1,
    "vtime.time()": 1.0,
    "RLock with-block": 10.1,
    "Condition.notify_all(), nobody waiting": 5.1,
    "selftime.timed around a no-op": 11.1,
    "flush: state frame built and packed": 3.05,
    "clock thread: io release handled (decode, wake, flush)": 3.0,
    "decode_to_runtime(io frame)": 3.0,
    "netio sendall, 200 B on an API connection": 2.0,
    "netio recv_into, 200 B gated on an API connection": 4.05,
}


def best_us(fn: Callable[[], object], n: int, repeat: int) -> float:
    """CPU µs per call of ``fn``: the best of ``repeat`` loops of ``n`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, time.process_time() - start)
    return best / n * 1e6


class _NullSocket:
    def sendall(self, data: bytes) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--n", type=int, default=100_000)
    args = parser.parse_args(argv)
    n, repeat = args.n, args.repeat

    rt = _runtime.Runtime(
        now_ns=10**15, epoch_ns=1_767_225_600 * 10**9, mono_ns=10**12,
        mode="deterministic", poke=lambda: None,
    )  # fmt: skip
    rt.adopt_main()
    current.ACTIVE = rt
    client = ClockClient("ipc:///nonexistent/clock", "bench")
    client._ready, client.runtime = True, rt
    client._sendall = _NullSocket().sendall
    rt.io[1] = [40000, 123_456, 7_890_123, 4]  # one reader waiting, as between pods

    rows: list[tuple[str, float, float]] = []  # (call, patched µs, stdlib µs or nan)

    def row(name: str, patched: Callable[[], object], stdlib: Callable[[], object] | None) -> None:
        base = best_us(stdlib, n, repeat) if stdlib is not None else float("nan")
        rows.append((name, best_us(patched, n, repeat), base))

    row("vtime.monotonic()", vtime.monotonic, time.monotonic)
    row("vtime.time()", vtime.time, time.time)
    vlock, slock = vthreading.RLock(), threading.RLock()

    def with_v() -> None:
        with vlock:
            pass

    def with_s() -> None:
        with slock:
            pass

    row("RLock with-block", with_v, with_s)
    vcond, scond = vthreading.Condition(), threading.Condition()
    vcond.acquire()
    scond.acquire()
    row("Condition.notify_all(), nobody waiting", vcond.notify_all, scond.notify_all)
    noop = selftime.timed(lambda: None)
    row("selftime.timed around a no-op", noop, lambda: None)

    def flush() -> None:
        client._last_state = None  # a report is due, as after each wake-up
        client.flush_locked()

    row("flush: state frame built and packed", flush, None)
    frame = clockproto.encode(clockproto.io_release([[40000, 123_456]], 10**15))
    row("decode_to_runtime(io frame)", lambda: clockproto.decode_to_runtime(frame), None)

    main_ts = rt.holder
    del rt.io[1]
    reader = _runtime.ThreadState((0, 1), "reader")

    def io_release() -> None:
        # a reader parked on port 40000, as the clock thread finds it: then the broker's go
        with rt.lock:
            waiter = _runtime.Waiter(reader)
            waiter.parked = True
            rt.io[2] = [40000, 123_456, 7_890_123, 5]
            rt.io_gates[2] = _runtime._IoGate(reader, netio._Conn(40000), waiter)
            rt.holder = None
        client._handle(clockproto.decode_to_runtime(frame))
        reader.go.acquire()  # (the go the hand-off gave: nobody waits for it here)

    rt.holder = main_ts
    client.flush_locked()  # (the last report: idle, one reader)
    row("clock thread: io release handled (decode, wake, flush)", io_release, None)
    rt.holder = main_ts

    # an API connection: a loopback pair whose server end plays the facade
    server = socket.create_server(("127.0.0.1", 0))
    netio.install(f"127.0.0.1:{server.getsockname()[1]}")
    api = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    payload = b"x" * 200
    raw_sendall = socket.socket.sendall.__wrapped__  # type: ignore[attr-defined]
    raw_recv_into = socket.socket.recv_into.__wrapped__  # type: ignore[attr-defined]
    buf = bytearray(65536)

    def send_patched() -> None:
        api.sendall(payload)
        peer.recv_into(buf)  # (the facade's end: unwrapped, it is not an API socket)

    def send_raw() -> None:
        raw_sendall(api, payload)
        peer.recv_into(buf)

    row("netio sendall, 200 B on an API connection", send_patched, send_raw)
    conn = netio._lookup(api)

    def recv_patched() -> None:
        peer.sendall(payload)
        conn.allowed = conn.consumed + len(payload)  # the broker's go, already given
        api.recv_into(buf)

    def recv_raw() -> None:
        peer.sendall(payload)
        raw_recv_into(api, buf, len(payload))

    row("netio recv_into, 200 B gated on an API connection", recv_patched, recv_raw)
    for s in (api, peer, server):
        s.close()
    current.ACTIVE = None

    print(f"CPU µs per call, best of {repeat} × {n:,} (process_time); per pod: × calls per pod")
    print("| call | patched (µs) | stdlib (µs) | added (µs) | calls per pod | added per pod (µs) |")
    print("| --- | --- | --- | --- | --- | --- |")
    total = 0.0
    for name, patched, base in rows:
        added = patched - (0.0 if base != base else base)
        per_pod = PER_POD[name] * added
        total += per_pod
        stdlib = "-" if base != base else f"{base:.2f}"
        print(
            f"| {name} | {patched:.2f} | {stdlib} | {added:.2f} | {PER_POD[name]:g} "
            f"| {per_pod:.1f} |"
        )
    print(f"| total | | | | | {total:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
