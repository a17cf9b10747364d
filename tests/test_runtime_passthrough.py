"""With no broker configured (no TIMEWARP_* environment), every drop-in is the standard
library: a patched scheduler still runs on a real cluster."""

import asyncio
import datetime as dt
import queue
import sched
import threading
import time

import pytest

from timewarp import vasyncio, vdatetime, vqueue, vsched, vthreading, vtime
from timewarp._core import current


@pytest.fixture(autouse=True)
def _no_broker(monkeypatch):
    for name in ("TIMEWARP_CLOCK", "TIMEWARP_PROCESS"):
        monkeypatch.delenv(name, raising=False)
    assert current.ACTIVE is None


def test_clock_readings_are_real():
    assert abs(vtime.time() - time.time()) < 1
    assert abs(vtime.time_ns() - time.time_ns()) < 1e9
    assert abs(vtime.monotonic() - time.monotonic()) < 1
    assert abs(vtime.perf_counter() - time.perf_counter()) < 1
    assert vtime.gmtime()[:4] == time.gmtime()[:4]
    assert vtime.strftime("%Y") == time.strftime("%Y")
    assert vtime.ctime(0) == time.ctime(0)
    assert vtime.asctime((2020, 1, 2, 3, 4, 5, 3, 2, 0)) == time.asctime(
        (2020, 1, 2, 3, 4, 5, 3, 2, 0)
    )


def test_sleep_really_sleeps_and_rejects_what_the_stdlib_rejects():
    start = time.monotonic()
    vtime.sleep(0.02)
    assert time.monotonic() - start >= 0.02
    with pytest.raises(ValueError):
        vtime.sleep(-1)
    with pytest.raises(TypeError):
        vtime.sleep("1")


def test_datetime_drop_ins_return_real_classes():
    now = vdatetime.datetime_now(dt.UTC)
    assert type(now) is dt.datetime and now.tzinfo is dt.UTC
    assert abs((now - dt.datetime.now(dt.UTC)).total_seconds()) < 1
    assert type(vdatetime.datetime_utcnow()) is dt.datetime
    assert vdatetime.datetime_utcnow().tzinfo is None
    assert type(vdatetime.date_today()) is dt.date
    assert vdatetime.date_today() == dt.date.today()
    with pytest.raises(TypeError):
        vdatetime.datetime_now("UTC")


def test_threading_primitives_are_the_stdlib_ones():
    assert vthreading.Thread is threading.Thread
    assert type(vthreading.Lock()) is type(threading.Lock())
    assert type(vthreading.RLock()) is type(threading.RLock())
    event = vthreading.Event()
    assert isinstance(event, threading.Event)
    start = time.monotonic()
    assert event.wait(0.02) is False
    assert time.monotonic() - start >= 0.02
    cond = vthreading.Condition()
    with cond:
        assert cond.wait(0.01) is False
    sem = vthreading.BoundedSemaphore(1)
    assert sem.acquire(timeout=0.01)
    assert not sem.acquire(timeout=0.01)
    sem.release()
    with pytest.raises(ValueError):
        sem.release()
    fired = threading.Event()
    timer = vthreading.Timer(0.01, fired.set)
    timer.start()
    assert fired.wait(5)
    timer.join()
    barrier = vthreading.Barrier(1)
    assert barrier.wait(1) == 0


def test_queues_are_the_stdlib_ones():
    q = vqueue.Queue(maxsize=1)
    assert isinstance(q, queue.Queue)
    q.put(1)
    with pytest.raises(queue.Full):
        q.put(2, timeout=0.01)
    assert q.get(timeout=0.01) == 1
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)
    lifo = vqueue.LifoQueue()
    lifo.put(1)
    lifo.put(2)
    assert lifo.get() == 2
    pq = vqueue.PriorityQueue()
    pq.put(3)
    pq.put(1)
    assert pq.get() == 1
    sq = vqueue.SimpleQueue()
    assert isinstance(sq, queue.SimpleQueue)
    with pytest.raises(queue.Empty):
        sq.get(timeout=0.01)
    sq.put(5)
    assert sq.qsize() == 1 and sq.get() == 5


def test_sched_and_asyncio_are_real():
    s = vsched.scheduler()
    assert isinstance(s, sched.scheduler)
    hits = []
    s.enter(0.01, 1, hits.append, ("x",))
    s.run()
    assert hits == ["x"]
    loop = vasyncio.new_event_loop()
    assert type(loop) is type(asyncio.new_event_loop())
    loop.close()

    async def main():
        await asyncio.sleep(0.01)
        return 42

    assert vasyncio.run(main()) == 42
