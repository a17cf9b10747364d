"""Servers in threads, written the ordinary way (run under ``timewarp run --standalone``).

``poll``: a ``ThreadingHTTPServer`` in a daemon thread (``serve_forever`` polls every
0.5 s), a bare ``accept()`` loop with a 2 s socket timeout, and a daemon thread that
sleeps an hour at a time; nothing connects. The main thread sleeps 9 s and prints how
often each woke. The polls' timeouts are slack (they never move time by themselves): time
goes straight to 9 s, where each fires once (1 poll, 1 accept timeout), every run. Then
``shutdown()`` waits for the server thread to notice its flag at its next poll: waiting
for a thread hardens the poll, which comes at its own instant (9.5 s), not at the hourly
sleeper's.

``alone``: only an ``accept()`` with a 2 s timeout: nothing else is pending, so time goes
to its deadline (the timeout is raised at t=2.0) instead of standing still.

``serve``: the HTTP server only; prints its port and waits (sleeping 1 s at a time) until
a request from outside was served."""

import http.server
import socket
import sys
import threading
import time

polls = 0
served = threading.Event()


class Server(http.server.ThreadingHTTPServer):
    def service_actions(self):
        global polls
        polls += 1


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok\n")
        served.set()

    def log_message(self, *args):
        pass


def accept_loop(listener: socket.socket, counts: list) -> None:
    listener.settimeout(2.0)
    while True:
        try:
            listener.accept()[0].close()
        except TimeoutError:
            counts[0] += 1


def hourly() -> None:
    while True:
        time.sleep(3600)


if sys.argv[1] == "alone":
    alone = socket.create_server(("127.0.0.1", 0))
    alone.settimeout(2.0)
    try:
        alone.accept()
    except TimeoutError:
        print(f"accept timed out at t={time.monotonic() - 1000:.1f}")
    sys.exit(0)
server = Server(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
if sys.argv[1] == "poll":
    timeouts = [0]
    bare = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=accept_loop, args=(bare, timeouts), daemon=True).start()
    threading.Thread(target=hourly, daemon=True).start()
    time.sleep(9)
    print(f"polls: {polls}, accept timeouts: {timeouts[0]}, t={time.monotonic() - 1000:.1f}")
    server.shutdown()  # returns once serve_forever saw it, at its next poll (9.5 s)
    print(f"shut down at t={time.monotonic() - 1000:.1f}")
else:
    print(f"port {server.server_address[1]}", flush=True)
    while not served.is_set():
        time.sleep(1)
    print("served")
