import time
import threading
import datetime
from datetime import timedelta
from asyncio import sleep as async_sleep


def f(time):
    time.sleep(1)  # a parameter called time, not the module


def g(driver, threading=None):
    driver.sleep(2)
    driver.time.sleep(3)
    return threading.Event() if threading else None


class Clock:
    time = 5

    def sleep(self):
        return self.time


MESSAGE = "call time.sleep(1) and datetime.datetime.now()"  # time.time() in a comment
parsed = time.strptime("2024-01-01", "%Y-%m-%d")
cpu = time.process_time()
delta = timedelta(seconds=5)
when: datetime.datetime = datetime.datetime(2024, 1, 1)
event_type: type[threading.Event] = threading.Event
ok = isinstance(threading.current_thread(), threading.Thread)


def annotated(e: threading.Event, q: "queue.Queue[int]") -> threading.Thread:
    return threading.Thread(target=e.wait)


time.sleep = lambda seconds: None  # a monkeypatch of the stdlib stays one
del time.time


async def a():
    await async_sleep(1)
