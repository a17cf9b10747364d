"""A program whose last clean-up (a finalizer at interpreter exit, after the runtime
said goodbye to the clock) takes 3 s of real time: exiting slowly is not a deadlock."""

import select


class SlowToFinish:
    """Its clean-up waits 3 s of real time after the runtime said goodbye to the clock."""

    def __del__(self):
        select.select([], [], [], 3)


keep = SlowToFinish()
print("done", flush=True)
