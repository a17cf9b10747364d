"""Ten worker threads tick through a simulated day; a reporter prints every 6 hours.

Written the ordinary way (real `time`, `threading`, `datetime`): run it plainly and it
takes a day; run it under `timewarp run --standalone` and it takes well under a second,
printing the same virtual timestamps every run.
"""

import threading
import time
from datetime import UTC, datetime

DAY = 24 * 3600
PERIODS = [60, 120, 300, 600, 900, 1800, 3600, 5400, 7200, 10800]  # seconds, one per worker
ticks = [0] * len(PERIODS)
lock = threading.Lock()
done = threading.Event()


def worker(index: int, period: int) -> None:
    start = time.monotonic()
    while time.monotonic() - start + period <= DAY:
        time.sleep(period)
        with lock:
            ticks[index] += 1


def reporter() -> None:
    while not done.wait(6 * 3600):
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        with lock:
            print(f"{now}  ticks so far: {sum(ticks)}", flush=True)


workers = [threading.Thread(target=worker, args=(i, p)) for i, p in enumerate(PERIODS)]
report = threading.Thread(target=reporter, daemon=True)
report.start()
for w in workers:
    w.start()
for w in workers:
    w.join()
done.set()
end = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
print(f"{end}  day over: {sum(ticks)} ticks ({', '.join(map(str, ticks))})", flush=True)
