"""The SimGrid kernel model: a parallel task under a walltime (``EXEC_TIMEOUT``), as real
Batsim 4.2.1 runs it (``set_timeout`` then ``start``: SimGrid's timeout detector, a sleep
begun before the computation). Checked against the binary in tests/test_batsim_real.py
(seeds 1121, 1142, 1936); here the rule itself, without it."""

from __future__ import annotations

from simulator.kernel import EXEC_TIMEOUT, KILL, SLEEP, TIMED_OUT, Kernel


def _run(*actors):
    """Run the actors to the end; what each computation answered, and when."""
    kernel = Kernel()
    seen: dict[str, tuple[object, float]] = {}
    for name, make in actors:
        kernel.spawn(make(kernel, seen, name), name)
    assert kernel.run() is None
    return seen, kernel.clock


def _task(rate: float, limit: float):
    def code(kernel, seen, name):
        answer = yield (EXEC_TIMEOUT, rate, limit)
        seen[name] = (answer, kernel.clock)

    return code


def _sleeper(seconds: float):
    def code(kernel, seen, name):
        yield (SLEEP, seconds)
        seen[name] = ("slept", kernel.clock)

    return code


def test_a_task_as_long_as_its_limit_is_done_when_the_step_lands_on_its_end():
    seen, clock = _run(("task", _task(1.0, 1.0)))
    assert seen["task"] == (None, 1.0)
    assert clock == 1.0


def test_a_task_as_long_as_its_limit_times_out_when_a_step_ends_just_before_its_end():
    # another sleep ends 0.5 ns earlier: the detector's remainder (0.5 ns) is below SimGrid's
    # 1e-9 s precision, the computation's (0.5 ns of work) above its 1e-14
    seen, _ = _run(("task", _task(1.0, 1.0)), ("other", _sleeper(1.0 - 5e-10)))
    assert seen["task"] == (TIMED_OUT, 1.0 - 5e-10)
    assert seen["other"] == ("slept", 1.0 - 5e-10)


def test_a_task_longer_than_its_limit_times_out_at_the_limit():
    seen, clock = _run(("task", _task(0.5, 1.0)))  # 2 s of work, 1 s allowed
    assert seen["task"] == (TIMED_OUT, 1.0)
    assert clock == 1.0


def test_a_task_shorter_than_its_limit_is_done_and_its_detector_is_dropped():
    seen, clock = _run(("task", _task(1.0, 5.0)))
    assert seen["task"] == (None, 1.0)
    assert clock == 1.0  # nothing waits for the detector's 5 s


def test_killing_a_task_drops_its_detector():
    def task(kernel, seen, name):
        yield (EXEC_TIMEOUT, 0.1, 5.0)
        seen[name] = ("never", kernel.clock)

    def killer(kernel, seen, name):
        yield (SLEEP, 1.0)
        yield (KILL, victim["actor"])
        seen[name] = ("killed", kernel.clock)

    kernel = Kernel()
    seen: dict[str, tuple[object, float]] = {}
    victim = {"actor": kernel.spawn(task(kernel, seen, "task"), "task")}
    kernel.spawn(killer(kernel, seen, "killer"), "killer")
    assert kernel.run() is None
    assert seen == {"killer": ("killed", 1.0)}
    assert kernel.clock == 1.0  # neither the computation (10 s) nor the detector (5 s) ran on
