"""A simulated process's connection to an address of the simulated cluster (its nodes'
and pods' 10.0.0.0/8, the pods' 10.244.0.0/14 inside it) is refused at once — never a real packet, never a wall-clock
TCP timeout (timewarp/_core/podnetwork.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from simrun import ROOT

PROBE = """
import asyncio, errno, socket, time
import requests

def attempt(what, fn):
    try:
        fn()
        print(what, "connected")
    except requests.RequestException as exc:  # (an OSError too)
        print(what, type(exc).__name__)
    except OSError as exc:
        print(what, type(exc).__name__, exc.errno)

attempt("socket", lambda: socket.create_connection(("10.0.0.7", 10250), timeout=30))
attempt("pod", lambda: socket.create_connection(("10.244.3.17", 8080), timeout=30))
attempt("ipv4-mapped", lambda: socket.socket(socket.AF_INET6).connect(("::ffff:10.3.0.1", 80)))
print("connect_ex", socket.socket().connect_ex(("10.200.1.9", 8080)) == errno.ECONNREFUSED)
attempt("requests", lambda: requests.get("http://10.128.0.5:8080/healthz", timeout=30))

async def main():
    try:
        await asyncio.wait_for(asyncio.open_connection("10.1.2.3", 9090), 30)
        print("asyncio connected")
    except OSError as exc:
        print("asyncio", type(exc).__name__, exc.errno)
asyncio.run(main())

server = socket.create_server(("127.0.0.1", 0))
attempt("loopback", lambda: socket.create_connection(server.getsockname(), timeout=5))
"""


def test_connections_to_the_simulated_cluster_are_refused_at_once(tmp_path, subprocess_env):
    prog = tmp_path / "probe.py"
    prog.write_text(textwrap.dedent(PROBE))
    r = subprocess.run(
        [sys.executable, "-m", "timewarp", "run", "--standalone", "--", "python", str(prog)],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines() == [
        "socket ConnectionRefusedError 111",
        "pod ConnectionRefusedError 111",
        "ipv4-mapped ConnectionRefusedError 111",
        "connect_ex True",
        "requests ConnectionError",
        "asyncio ConnectionRefusedError 111",
        "loopback connected",
    ]
