"""A signal handler runs while the main thread is parked in a virtual wait, even when the
signal did not interrupt the wait (found as a determinism failure: a default_like
scheduler parked in ``Condition.wait()`` at a run's end never ran SIGTERM's handler, was
killed after the launcher's grace, and its log lacked its last line in one run of two).

CPython runs Python signal handlers in the main thread, between two bytecodes; a
blocking lock acquire runs them only when the signal interrupts it. One that came just
before the acquire blocked, or went to another thread, stays pending until the acquire
returns — and a virtual wait with nothing left to end it never returns."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from simrun import ROOT

# The main thread parks in a wait nobody ends; a helper thread waits until the main
# thread is inside the runtime's blocking acquire, then takes SIGUSR1 itself
# (pthread_kill): the handler is pending, the main thread's acquire is not interrupted.
PROGRAM = textwrap.dedent(
    """
    import linecache, signal, sys, threading, time
    from timewarp._core import runtime

    BOUND_S = 60.0
    parked, handled = threading.Event(), threading.Event()
    rt = runtime.Runtime(
        now_ns=0, epoch_ns=0, mono_ns=0, mode="deterministic",
        poke=lambda: None, flush=parked.set,  # flush: the process went idle (main parked)
    )
    rt.adopt_main()
    main_ident = threading.get_ident()

    class Stopped(Exception):
        pass

    def handler(signum, frame):
        raise Stopped

    def in_blocking_acquire():
        frame = sys._current_frames()[main_ident]
        return ".acquire(" in linecache.getline(frame.f_code.co_filename, frame.f_lineno)

    def helper():
        assert parked.wait(BOUND_S), "the main thread never parked"
        with rt.lock:  # taken once the main thread let go of it, on its way to block
            pass
        give_up = time.monotonic() + BOUND_S
        while not in_blocking_acquire():  # (this thread holds the GIL: main is inside)
            assert time.monotonic() < give_up, "the main thread never blocked"
            time.sleep(0)  # let the main thread take the GIL and go on
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)
        if not handled.wait(BOUND_S):
            print("the handler never ran: the main thread stayed parked", flush=True)
            sys.stdout.flush()
            import os
            os._exit(1)

    signal.signal(signal.SIGUSR1, handler)
    threading.Thread(target=helper, daemon=True).start()
    try:
        rt.wait_for_wake(None)  # nobody ends this wait
    except Stopped:
        handled.set()
        with rt.lock:  # the runtime lock is free again, not left taken
            pass
        print("the handler ran in the wait", flush=True)
    """
)


def test_a_pending_signal_handler_runs_while_the_main_thread_is_parked(subprocess_env):
    r = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        cwd=ROOT,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "the handler ran in the wait", r.stdout + r.stderr
