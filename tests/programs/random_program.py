"""Interpreter for generated thread programs (tests/test_clock_properties.py).

argv[1] is a JSON spec: {"threads": [[op, ...], ...]}. Ops:
  ["sleep", ms] ["now"] ["set", e] ["clear", e] ["wait", e, ms] ["put", q, v, ms]
  ["get", q, ms] ["timer", ms]
Every op appends one JSON line to the log, in the order things happen, with the
virtual monotonic time (ns) at its start and end. Uses the runtime directly.
"""

import json
import sys
import threading

from timewarp import vqueue, vthreading, vtime

spec = json.loads(sys.argv[1])
events = [vthreading.Event() for _ in range(3)]
queues = [vqueue.Queue(maxsize=2) for _ in range(2)]
log_lock = vthreading.Lock()
log = []


def emit(**entry):
    with log_lock:
        entry["seq"] = len(log)
        log.append(entry)


def run_thread(tid, ops):
    for step, op in enumerate(ops):
        kind = op[0]
        t0 = vtime.monotonic_ns()
        result = None
        if kind == "sleep":
            vtime.sleep(op[1] / 1000)
        elif kind == "now":
            pass
        elif kind == "set":
            events[op[1]].set()
        elif kind == "clear":
            events[op[1]].clear()
        elif kind == "wait":
            result = events[op[1]].wait(op[2] / 1000)
        elif kind == "put":
            try:
                queues[op[1]].put(op[2], timeout=op[3] / 1000)
                result = True
            except vqueue.Full:
                result = False
        elif kind == "get":
            try:
                result = queues[op[1]].get(timeout=op[2] / 1000)
            except vqueue.Empty:
                result = None
        elif kind == "timer":
            name = f"{tid}.{step}"

            def fired(name=name, due=t0 + op[1] * 1_000_000):
                emit(thread="timer", op="fire", name=name, due=due, t=vtime.monotonic_ns())

            vthreading.Timer(op[1] / 1000, fired).start()
            emit(thread=tid, op="timer", name=name, due=t0 + op[1] * 1_000_000, t=t0)
            continue
        emit(
            thread=tid,
            step=step,
            op=kind,
            args=op[1:],
            t0=t0,
            t=vtime.monotonic_ns(),
            result=result,
        )


threads = [
    threading.Thread(target=run_thread, args=(i, ops), name=f"T{i}")
    for i, ops in enumerate(spec["threads"])
]
for t in threads:
    t.start()
for t in threads:
    t.join()
for t in threading.enumerate():
    if t is not threading.current_thread() and not t.daemon:
        t.join()
emit(thread="main", op="end", t=vtime.monotonic_ns())
for entry in log:
    print(json.dumps(entry, sort_keys=True))
