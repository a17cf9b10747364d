"""The sample scheduler ``default_like`` with a /metrics server thread beside it, the way
operators start one: ``--server prometheus`` (``prometheus_client.start_http_server``) or
``--server http`` (``http.server.ThreadingHTTPServer`` + ``serve_forever`` in a daemon
thread). Nothing scrapes it in a simulation. Other arguments go to ``default_like``."""

import argparse
import http.server
import runpy
import sys
import threading

parser = argparse.ArgumentParser()
parser.add_argument("--server", choices=("prometheus", "http"), required=True)
args, rest = parser.parse_known_args()

if args.server == "prometheus":
    from prometheus_client import Counter, start_http_server

    start_http_server(0, addr="127.0.0.1")
    Counter("scheduler_starts", "times this scheduler started").inc()
else:

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"scheduler_up 1\n")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()

sys.argv = ["default_like", *rest]
runpy.run_module("sample_schedulers.default_like", run_name="__main__")
