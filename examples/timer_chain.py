"""A chain of threading.Timer callbacks with growing intervals (1, 2, 4, ... s)."""

import threading
import time

started = time.monotonic()
done = threading.Event()


def step(n):
    print(f"timer {n} fired at t={time.monotonic() - started:.1f}s")
    if n < 6:
        threading.Timer(2**n, step, args=(n + 1,)).start()
    else:
        done.set()


threading.Timer(1, step, args=(0,)).start()
done.wait()
print("chain done")
