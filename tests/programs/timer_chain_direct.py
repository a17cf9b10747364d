"""A threading.Timer chain: each timer schedules the next, with growing intervals."""

from timewarp import vthreading, vtime

done = vthreading.Event()
fired = []


def step(n):
    fired.append((n, vtime.monotonic_ns() - 1_000_000_000_000))
    if n < 5:
        vthreading.Timer(2**n, step, args=(n + 1,)).start()
    else:
        done.set()


vthreading.Timer(1, step, args=(0,)).start()
assert done.wait(3600)
print(fired)
