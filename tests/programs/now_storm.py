"""Many threads read the clock at once (free threads mode): count broker round trips."""

import threading

from timewarp import vtime
from timewarp._core import activation as _activation

N_THREADS, N_CALLS = 16, 50
barrier = threading.Barrier(N_THREADS)  # real barrier: start together


def reader():
    barrier.wait()
    for _ in range(N_CALLS):
        vtime.time_ns()


threads = [threading.Thread(target=reader) for _ in range(N_THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(N_THREADS * N_CALLS, _activation.CLIENT.round_trips)
