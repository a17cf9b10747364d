import time as t
import datetime as dt
from time import sleep, time as now, strptime
from datetime import datetime as DT, date
import functools
from . import clock
from .time import sleep as local_sleep


def waiter(clock_fn=t.monotonic, pause=functools.partial(t.sleep, 0.1)):
    start = clock_fn()
    pause()
    return clock_fn() - start


def stamps():
    def nested():
        return (
            now(),
            t.time_ns(),
            dt.datetime.now(),
            dt.datetime.utcnow(),
            dt.date.today(),
            DT.today(),
            date.today(),
            t.localtime(),
            t.gmtime(),
            t.asctime(),
            t.perf_counter(),
            t.perf_counter_ns(),
            t.monotonic_ns(),
        )

    sleep(0.0)
    local_sleep(1)
    clock.sleep(1)
    return nested()


parsed = strptime("2024", "%Y")
elapsed = t.process_time()
