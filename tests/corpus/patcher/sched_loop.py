import sched, time


def every(s: sched.scheduler, period: float, action) -> None:
    action()
    s.enter(period, 1, every, (s, period, action))


s = sched.scheduler(time.time, time.sleep)
every(s, 10, lambda: print(time.strftime("%H:%M:%S"), time.ctime()))
s.run()
