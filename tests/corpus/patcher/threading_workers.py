import queue
import threading
import time as _time
from threading import Timer, Lock, current_thread


class Worker(threading.Thread):
    """Takes jobs from a queue; stops when told."""

    def __init__(self, jobs: queue.Queue, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.jobs = jobs
        self.stop = stop
        self.lock = threading.RLock()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                job = self.jobs.get(timeout=0.5)
            except queue.Empty:
                continue
            with self.lock:
                _time.sleep(job)


def heartbeat(stop: threading.Event, period: float = 1.0) -> None:
    print("alive", current_thread().name, _time.time())
    if not stop.is_set():
        Timer(period, heartbeat, args=(stop, period)).start()


def run_pool(n: int = 4) -> None:
    jobs: queue.Queue[float] = queue.PriorityQueue()
    stop = threading.Event()
    cond = threading.Condition(Lock())
    barrier = threading.Barrier(n)
    workers = [Worker(jobs, stop) for _ in range(n)]
    for w in workers:
        w.start()
    sem = threading.BoundedSemaphore(2)
    if isinstance(workers[0], threading.Thread):
        heartbeat(stop)
