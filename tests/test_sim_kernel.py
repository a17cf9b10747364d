"""The SimGrid kernel model: a parallel task under a walltime (``EXEC_TIMEOUT``), as real
Batsim 4.2.1 runs it (``set_timeout`` then ``start``: SimGrid's timeout detector, a sleep
begun before the computation). Checked against the binary in tests/test_batsim_real.py
(seeds 1121, 1142, 1936); here the rule itself, without it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.kernel import (
    EXEC_TIMEOUT,
    KILL,
    SLEEP,
    TIMED_OUT,
    Kernel,
    _Action,
    _alone,
    _share,
    fair_bottleneck,
)  # fmt: skip


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


# --- the max-min solver's path for an action alone on its constraints ------------------

_capacity = st.sampled_from([1.25e8, 1e10, 1e9, 4.2e11, 7.5, 1e13, 1e20, 3.3e-3, 0.0])


@settings(max_examples=400, deadline=None)
@given(
    elements=st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from([0.0, 1.0, 0.5, 3.0, 1e6, 1e-7])),
        min_size=1,
        max_size=6,
    ),
    capacities=st.lists(st.tuples(_capacity, st.booleans()), min_size=6, max_size=6),
    bound=st.sampled_from([0.0, 1.0, 1e10, 2.5e-4, 1.25e8, 7.5]),
)
def test_an_action_alone_gets_the_rate_of_the_general_solver(elements, capacities, bound):
    """_alone is fair_bottleneck's loop on scalars: the same rate, value and mu to the bit
    as the general loop (_share), for every mix of capacities, fatpipes, weights and
    bounds; an action that uses one constraint twice is left to the general loop."""
    constraints = dict(enumerate(capacities))
    if not any(weight != 0 for _, weight in elements):
        return  # (not a variable of the solver)
    alone, general = _action(elements, bound), _action(elements, bound)
    if len({cid for cid, _ in elements}) != len(elements):
        assert not _alone(alone, constraints)
        return
    assert _alone(alone, constraints)
    _share([general], constraints)
    assert (alone.rate, alone.value, alone.mu) == (general.rate, general.value, general.mu)
    for _ in range(2):  # solved, then its answer reused: the same
        again = _action(elements, bound)
        fair_bottleneck([again], constraints)
        assert (again.rate, again.value, again.mu) == (general.rate, general.value, general.mu)


def _action(elements, bound):
    action = _Action(1.0, 0.0, 0, None)  # type: ignore[arg-type]
    action.elements, action.bound = tuple(elements), bound
    return action
