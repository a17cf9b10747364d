"""Uses every rewritten facility; prints only what does not depend on the clock's value,
so the original, the patched copy in passthrough, and the patched copy in virtual time
must print the same lines."""

import asyncio
import datetime as dt
import queue
import sched
import threading
import time
from time import gmtime, strftime


def main() -> None:
    out = []
    jobs = queue.PriorityQueue()
    for priority in (3, 1, 2):
        jobs.put(priority)
    results = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                item = jobs.get(timeout=0.01)
            except queue.Empty:
                return
            with lock:
                results.append(item)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.append(sorted(results))

    event = threading.Event()
    out.append(event.wait(0.01))
    event.set()
    out.append(event.wait(0.01))
    fired = threading.Event()
    threading.Timer(0.01, fired.set).start()
    out.append(fired.wait(5))

    s = sched.scheduler(time.monotonic, time.sleep)
    order = []
    s.enter(0.02, 1, order.append, ("b",))
    s.enter(0.01, 1, order.append, ("a",))
    s.run()
    out.append(order)

    async def coroutine() -> str:
        await asyncio.sleep(0.01)
        return "async done"

    out.append(asyncio.run(coroutine()))
    out.append(strftime("%Y-%m-%d", gmtime(0)))
    out.append(time.asctime(time.gmtime(86400)))
    start = time.monotonic()
    time.sleep(0.01)
    out.append(time.monotonic() - start >= 0.01)
    now = dt.datetime.now(dt.timezone.utc)
    out.append((type(now).__name__, now.tzinfo is dt.timezone.utc))
    out.append(type(dt.date.today()).__name__)
    out.append(isinstance(threading.Event(), threading.Event))

    class Worker(threading.Thread):
        def run(self) -> None:
            self.value = 42

    w = Worker()
    w.start()
    w.join()
    out.append(w.value)
    cond = threading.Condition()
    with cond:
        out.append(cond.wait(0.01))
    out.append(threading.BoundedSemaphore(1).acquire(timeout=0.01))
    out.append(threading.Barrier(1).wait())
    lifo = queue.LifoQueue()
    lifo.put(1)
    lifo.put(2)
    out.append(lifo.get())
    for line in out:
        print(line)


if __name__ == "__main__":
    main()
