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


def _run(program: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=200,
    )


def test_a_pending_signal_handler_runs_while_the_main_thread_is_parked(subprocess_env):
    r = _run(PROGRAM, subprocess_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "the handler ran in the wait", r.stdout + r.stderr


# The main thread's timed wait is woken while a helper thread holds the runtime's lock:
# the main thread blocks taking the lock back; SIGUSR1 comes to it there and its handler
# raises out of that acquire, without the lock. Then the helper lets go of the lock.
TAKE_BACK_PROGRAM = textwrap.dedent(
    """
    import linecache, signal, sys, threading, time
    from timewarp._core import runtime

    BOUND_S = 60.0
    parked, handled, helper_done = threading.Event(), threading.Event(), threading.Event()
    helper_error = []
    rt = runtime.Runtime(
        now_ns=0, epoch_ns=0, mono_ns=0, mode="deterministic",
        poke=lambda: None, flush=parked.set,
    )
    rt.adopt_main()
    main_ident = threading.get_ident()

    class Stopped(Exception):
        pass

    def handler(signum, frame):
        handled.set()
        raise Stopped

    def taking_the_lock_back():
        frame = sys._current_frames()[main_ident]
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        return ".acquire(" in line and frame.f_code.co_name != "block_on"

    def helper():
        try:
            assert parked.wait(BOUND_S), "the main thread never parked"
            with rt.lock:
                (tid,) = rt.timers
                rt.on_fire_locked([tid], 1_000)  # the wait is over: main wants the lock
                give_up = time.monotonic() + BOUND_S
                while not taking_the_lock_back():
                    assert time.monotonic() < give_up, "the main thread never came back"
                    time.sleep(0)  # (let the main thread run on to the acquire)
                signal.pthread_kill(main_ident, signal.SIGUSR1)
                assert handled.wait(BOUND_S), "the handler never ran"
        except BaseException as exc:
            helper_error.append(repr(exc))
        finally:
            helper_done.set()

    signal.signal(signal.SIGUSR1, handler)
    threading.Thread(target=helper, daemon=True).start()
    try:
        rt.wait_for_wake(1_000)
        print("the wait ended without the handler's exception")
    except Stopped:
        print("the handler's exception ended the wait")
    except BaseException as exc:
        print("the wait ended with", repr(exc))
    assert helper_done.wait(BOUND_S), "the helper never finished"
    print("helper:", helper_error or "ok")
    print("lock free:", rt.lock.acquire(False))
    """
)


def test_a_signal_while_the_main_thread_takes_the_runtime_lock_back(subprocess_env):
    """A program's SIGTERM handler raises ``SystemExit`` in its main thread wherever that
    thread is — also while it takes the runtime's lock back after a virtual wait, where
    ``threading`` lets the exception out of the blocking acquire *without* the lock. The
    wait must end with the handler's exception and the lock held by nobody, not end by
    releasing a lock another thread holds ("release unlocked lock" there)."""
    r = _run(TAKE_BACK_PROGRAM, subprocess_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        "the handler's exception ended the wait",
        "helper: ok",
        "lock free: True",
    ], r.stdout + r.stderr
