"""The facade's HTTP layer alone: read one binding POST and frame its 201, no sockets.

    .venv/bin/python benchmarks/facade_http.py [--rounds 3] [--requests 20000]

``HttpServer._read_request`` + ``HttpServer._encode`` on one kept-alive connection (h11
parsing, the head checks, the request's headers; the response framed), then the next
cycle; the bytes come from a fake socket. Prints µs per request (``process_time``), and
the framing alone. To compare two checkouts, copy this file into the other one's
benchmarks/ and run both, alternated (a checkout without ``_Wire.next_cycle`` starts the
next cycle with h11's ``start_next_cycle``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.facade import server  # noqa: E402

BODY = (
    b'{"kind":"Binding","apiVersion":"v1","metadata":{"name":"pod-1234","namespace":'
    b'"default","uid":"abcd"},"target":{"kind":"Node","name":"node-17"}}'
)
REQUEST = (
    b"POST /api/v1/namespaces/default/pods/pod-1234/binding HTTP/1.1\r\n"
    b"Host: 127.0.0.1:40000\r\n"
    b"User-Agent: kube-scheduler/v1.31.0 (linux/amd64) kubernetes/abcdef/scheduler\r\n"
    b"Content-Length: %d\r\nAccept: application/json, */*\r\n"
    b"Content-Type: application/json\r\nAuthorization: Bearer tw-1234\r\n"
    b"Accept-Encoding: gzip\r\n\r\n" % len(BODY)
) + BODY
RESPONSE = server.Response(
    201, b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}'
)


class _Socket:
    def recv(self, n: int) -> bytes:
        return REQUEST


def _round(requests: int) -> tuple[float, float]:
    srv = server.HttpServer(lambda request: RESPONSE, server.Ledger())
    srv._listener.close()  # never started: only the request path is used
    conn = server.Connection(1, None)  # type: ignore[arg-type]
    wire = server._Wire(_Socket())  # type: ignore[arg-type]
    next_cycle = getattr(wire, "next_cycle", None) or wire.h.start_next_cycle
    encoding = 0.0
    started = time.process_time()
    for _ in range(requests):
        wire.begin_request()
        srv._read_request(conn, wire)
        t = time.process_time()
        srv._encode(wire, RESPONSE)
        encoding += time.process_time() - t
        next_cycle()
    whole = time.process_time() - started
    return whole / requests * 1e6, encoding / requests * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=20000)
    args = parser.parse_args()
    _round(200)  # warm up
    for _ in range(args.rounds):
        whole, encoding = _round(args.requests)
        print(f"read + frame {whole:6.1f} us/request   of which framing {encoding:5.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
