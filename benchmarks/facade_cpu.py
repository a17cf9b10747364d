"""CPU time per request through the facade's transport, server and client in one process.

    .venv/bin/python benchmarks/facade_cpu.py [--repeat 5]

Wall-clock rates (benchmarks/facade.py) measure the queue for a CPU as much as the
facade on a shared machine; process CPU time per request is what the transport and the
handler cost, whatever the load. Keep-alive http.client connections; min / median / max
of --repeat rounds of --requests each. To compare two checkouts, copy this file into the
other one's benchmarks/ and run both, alternated.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.facade import Facade, ManualClock  # noqa: E402
from broker.facade.objects import make_node  # noqa: E402

SPEC = {"containers": [{"name": "c", "image": "busybox"}]}


def _round(conn, headers, requests, make) -> float:
    started = time.process_time()
    for i in range(requests):
        method, path, body = make(i)
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        assert resp.status in (200, 201), (resp.status, path)
    return (time.process_time() - started) / requests * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    facade = Facade(ManualClock())
    for i in range(1000):
        facade.store.create("nodes", make_node(f"node-{i:04d}"))
    token = facade.add_token("bench")
    facade.start()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection(facade.host, facade.port)
    pods = iter(range(10**9))

    def bind(_: int):
        name = f"p{next(pods)}"
        facade.store.create("pods", {"metadata": {"name": name}, "spec": SPEC}, namespace="default")
        body = json.dumps(
            {"metadata": {"name": name}, "target": {"kind": "Node", "name": "node-0000"}}
        )
        return "POST", f"/api/v1/namespaces/default/pods/{name}/binding", body.encode()

    cases = {
        "get one node": lambda i: ("GET", "/api/v1/nodes/node-0001", None),
        "list 1,000 nodes": lambda i: ("GET", "/api/v1/nodes", None),
        "bind a pod (+ its create in the store)": bind,
    }
    print(f"python {sys.version.split()[0]}, repeat={args.repeat}, requests={args.requests}")
    for name, make in cases.items():
        n = args.requests // 10 if "1,000" in name else args.requests
        _round(conn, headers, 20, make)  # warm up
        cpu = [_round(conn, headers, n, make) for _ in range(args.repeat)]
        print(
            f"{name:<40} CPU us/request: min {min(cpu):,.0f}  median "
            f"{statistics.median(cpu):,.0f}  max {max(cpu):,.0f}"
        )
    facade.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
