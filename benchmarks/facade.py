"""Facade throughput and memory.

    .venv/bin/python benchmarks/facade.py [--repeat 5] [--quick]

Measures, each --repeat times (min / median / max reported):
- list nodes (16, 1k, 10k nodes) over one keep-alive connection (http.client), req/s;
- get one node with the official client (its own floor), req/s;
- bind (POST .../pods/{name}/binding), req/s;
- watch fan-out: 50 watch connections, N pod creations, until all 50 saw all N: events/s;
- memory: RSS growth for 100k pods in the store, then after 100k more writes (history
  stays bounded).
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.facade import Facade, ManualClock  # noqa: E402
from broker.facade.objects import make_node  # noqa: E402

POD_SPEC = {
    "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]
}


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def summary(values: list[float]) -> str:
    return (
        f"min {min(values):,.0f}  median {statistics.median(values):,.0f}  max {max(values):,.0f}"
    )


def new_facade(nodes: int) -> tuple[Facade, str]:
    f = Facade(ManualClock())
    for i in range(nodes):
        f.store.create("nodes", make_node(f"node-{i:05d}"))
    token = f.add_token("bench")
    return f.start(), token


def rate(
    conn: http.client.HTTPConnection,
    token: str,
    method: str,
    paths,
    bodies=None,
    seconds: float = 1.0,
) -> float:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    count, started = 0, time.perf_counter()
    for i, path in enumerate(paths):
        body = None if bodies is None else bodies[i]
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        assert resp.status in (200, 201), (resp.status, path)
        count += 1
        if time.perf_counter() - started > seconds:
            break
    return count / (time.perf_counter() - started)


def bench_list(nodes: int, repeat: int) -> list[float]:
    f, token = new_facade(nodes)
    try:
        out = []
        warm = http.client.HTTPConnection(f.host, f.port)
        rate(warm, token, "GET", ["/api/v1/nodes"], seconds=0)  # encodes every node once
        warm.close()
        for _ in range(repeat):
            conn = http.client.HTTPConnection(f.host, f.port)
            out.append(rate(conn, token, "GET", ["/api/v1/nodes"] * 100_000, seconds=1.0))
            conn.close()
        return out
    finally:
        f.stop()


def bench_client_get(repeat: int) -> list[float]:
    from kubernetes import client

    f, token = new_facade(16)
    try:
        conf = client.Configuration()
        conf.host = f.url
        conf.api_key = {"authorization": f"Bearer {token}", "BearerToken": f"Bearer {token}"}
        out = []
        with client.ApiClient(conf) as api:
            v1 = client.CoreV1Api(api)
            for _ in range(repeat):
                n, started = 0, time.perf_counter()
                while time.perf_counter() - started < 1.0:
                    v1.read_node("node-00001")
                    n += 1
                out.append(n / (time.perf_counter() - started))
        return out
    finally:
        f.stop()


def bench_bind(repeat: int, pods: int = 3000) -> list[float]:
    out = []
    for _ in range(repeat):
        f, token = new_facade(16)
        try:
            for i in range(pods):
                f.store.create(
                    "pods", {"metadata": {"name": f"p{i}"}, "spec": POD_SPEC}, namespace="default"
                )
            bodies = [
                json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": f"p{i}"},
                        "target": {"kind": "Node", "name": f"node-{i % 16:05d}"},
                    }
                )
                for i in range(pods)
            ]
            paths = [f"/api/v1/namespaces/default/pods/p{i}/binding" for i in range(pods)]
            conn = http.client.HTTPConnection(f.host, f.port)
            out.append(rate(conn, token, "POST", paths, bodies, seconds=1.0))
            conn.close()
        finally:
            f.stop()
    return out


def _read_events(sock: socket.socket, want: int, done: threading.Barrier) -> None:
    """Read a chunked watch stream until ``want`` events (initial ones excluded) arrived."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    marker = b'{"type":'
    seen, tail = buf.count(marker), buf[-(len(marker) - 1) :]
    while seen < want:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        seen += (tail + chunk).count(marker)  # the tail is too short to hold a whole marker
        tail = chunk[-(len(marker) - 1) :]
    done.wait()


def bench_fanout(repeat: int, watchers: int = 50, events: int = 500) -> list[float]:
    out = []
    for _ in range(repeat):
        f, token = new_facade(1)
        try:
            socks, threads = [], []
            done = threading.Barrier(watchers + 1)
            parked = threading.Semaphore(0)
            f.add_idle_listener(lambda port, parked=parked: parked.release())
            for _ in range(watchers):
                s = socket.create_connection((f.host, f.port))
                s.sendall(
                    f"GET /api/v1/namespaces/default/pods?watch=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
                )
                socks.append(s)
                t = threading.Thread(target=_read_events, args=(s, events, done), daemon=True)
                threads.append(t)
                t.start()
            while f.token_stats("bench").watches < watchers or f.token_stats("bench").in_flight:
                parked.acquire(timeout=1)
            started = time.perf_counter()
            for i in range(events):
                f.store.create(
                    "pods", {"metadata": {"name": f"p{i}"}, "spec": POD_SPEC}, namespace="default"
                )
            done.wait(timeout=120)
            elapsed = time.perf_counter() - started
            out.append(watchers * events / elapsed)
            for s in socks:
                s.close()
        finally:
            f.stop()
    return out


def bench_memory(pods: int = 100_000) -> dict[str, float]:
    gc.collect()
    f = Facade(ManualClock(), history_limit=1000)
    before = rss_bytes()
    started = time.perf_counter()
    for i in range(pods):
        f.store.create(
            "pods",
            {"metadata": {"name": f"pod-{i}", "labels": {"app": "bench"}}, "spec": POD_SPEC},
            namespace="default",
        )
    create_s = time.perf_counter() - started
    gc.collect()
    after_create = rss_bytes()
    for i in range(pods):
        f.store.patch("pods", "default", f"pod-{i}", {"metadata": {"annotations": {"n": "1"}}})
    gc.collect()
    after_writes = rss_bytes()
    return {
        "create_per_s": pods / create_s,
        "rss_mib_after_create": (after_create - before) / 2**20,
        "bytes_per_pod": (after_create - before) / pods,
        "rss_mib_after_100k_more_writes": (after_writes - before) / 2**20,
        "history_len": f.store.history_size("pods"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    sizes = (16, 1000) if args.quick else (16, 1000, 10_000)
    load = os.getloadavg()[0]
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.1f}, repeat={args.repeat}"
    )
    for n in sizes:
        print(f"list nodes ({n:>6} nodes), req/s: {summary(bench_list(n, args.repeat))}")
    print(f"get node (official client 37), req/s: {summary(bench_client_get(args.repeat))}")
    print(f"bind, req/s: {summary(bench_bind(args.repeat))}")
    print(f"watch fan-out to 50 watchers, events delivered/s: {summary(bench_fanout(args.repeat))}")
    print(f"load average after the throughput runs: {os.getloadavg()[0]:.1f}")
    mem = bench_memory(10_000 if args.quick else 100_000)
    print(
        "memory: "
        + ", ".join(f"{k} {v:,.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in mem.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
