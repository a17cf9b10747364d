import threading
from datetime import UTC

from timewarp import vdatetime, vthreading
from timewarp import vtime as time

DAY = 24 * 3600
PERIODS = [60, 120, 300, 600, 900, 1800, 3600, 5400, 7200, 10800]
ticks = [0] * len(PERIODS)
lock = vthreading.Lock()
done = vthreading.Event()


def worker(index, period):
    start = time.monotonic()
    while time.monotonic() - start + period <= DAY:
        time.sleep(period)
        with lock:
            ticks[index] += 1


def reporter():
    while not done.wait(6 * 3600):
        print(
            vdatetime.datetime_now(UTC).strftime("%Y-%m-%d %H:%M:%S"),
            sum(ticks),
            flush=True,
        )


workers = [threading.Thread(target=worker, args=(i, p)) for i, p in enumerate(PERIODS)]
r = threading.Thread(target=reporter, daemon=True)
r.start()
for w in workers:
    w.start()
for w in workers:
    w.join()
done.set()
print("end", vdatetime.datetime_now(UTC), sum(ticks), ticks, flush=True)
