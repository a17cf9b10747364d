"""An APScheduler interval job: RUNS runs, INTERVAL seconds apart, then shut down.

    python aps_interval.py INTERVAL RUNS [--times]

Prints the run count, and with --times the wall-clock time of the first and last
run (exact only in virtual time)."""

import sys
import threading
from datetime import datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler

interval, wanted = float(sys.argv[1]), int(sys.argv[2])
done = threading.Event()
runs = []


def tick():
    if done.is_set():
        return  # a run between done and shutdown (a slow machine) is not counted
    runs.append(datetime.now())
    if len(runs) >= wanted:
        done.set()


scheduler = BackgroundScheduler()
start = datetime.now() + timedelta(seconds=interval)
scheduler.add_job(tick, "interval", seconds=interval, next_run_time=start)
scheduler.start()
done.wait(timeout=interval * wanted * 100 + 30)
scheduler.shutdown()
print(len(runs), "runs")
if "--times" in sys.argv:
    print(f"first {runs[0]:%H:%M:%S}, last {runs[-1]:%H:%M:%S}")
