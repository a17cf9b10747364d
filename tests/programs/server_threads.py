"""Servers in threads, written the ordinary way (run under ``timewarp run --standalone``).

``poll``: a ``ThreadingHTTPServer`` in a daemon thread (``serve_forever`` polls every
0.5 s) and a bare ``accept()`` loop with a 2 s socket timeout; nothing connects. The main
thread sleeps 9 s and prints how often each woke: with virtual timeouts, 17 polls (at
0.5 … 8.5 s) and 4 accept timeouts (at 2, 4, 6, 8 s), every run; then ``shutdown()``
returns at the server's next poll (9 s: its timer was due with the main thread's).

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


server = Server(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
if sys.argv[1] == "poll":
    timeouts = [0]
    bare = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=accept_loop, args=(bare, timeouts), daemon=True).start()
    time.sleep(9)
    print(f"polls: {polls}, accept timeouts: {timeouts[0]}, t={time.monotonic() - 1000:.1f}")
    server.shutdown()  # returns once serve_forever saw it, at its next poll
    print(f"shut down at t={time.monotonic() - 1000:.1f}")
else:
    print(f"port {server.server_address[1]}", flush=True)
    while not served.is_set():
        time.sleep(1)
    print("served")
