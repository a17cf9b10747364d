"""The SimGrid kernel model: a parallel task under a walltime (``EXEC_TIMEOUT``), as real
Batsim 4.2.1 runs it (``set_timeout`` then ``start``: SimGrid's timeout detector, a sleep
begun before the computation). Checked against the binary in tests/test_batsim_real.py
(seeds 1121, 1142, 1936); here the rule itself, without it."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simulator.kernel import (
    BY_NAME_THEN,
    CREATE,
    EXEC,
    EXEC_TIMEOUT,
    GET,
    KILL,
    PRECISION,
    PUT,
    SLEEP,
    TIMED_OUT,
    Actor,
    Kernel,
    Mailbox,
    Ptask,
    _Action,
    _alone,
    _share,
    _Sleeps,
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


# --- _advance's steps against SimGrid's solve() taken one step per call, solved each step --


def _advance_every_step(self) -> bool:
    """The oracle: one time step per call, the max-min shares solved at every step (the
    kernel's step as it was before the shares were solved only when they may change and
    steps that wake nobody were followed in _advance's own loop; main 16d9d9f)."""
    from simulator.kernel import PRECISION, Actor, _first

    bytes_precision = 1e-14
    actions = [a for a in self._actions if not a.done]
    self._actions = actions
    sleeps = self._sleeps
    if not actions and not sleeps.count:
        return False
    delta = sleeps.next()
    if self.constraints is not None:
        fair_bottleneck(actions, self.constraints)
    for action in actions:
        if action.latency > 0:
            need = action.latency
        else:
            need = 0.0 if action.rate == 0 else action.remaining / action.rate
        if need < delta:
            delta = need
    self.clock = self.clock + delta
    self.steps += 1
    ended = sleeps.advance(delta) if sleeps.count else []
    for action in actions:
        if action.latency > 0:
            latency = action.latency - delta
            action.latency = latency = latency if latency >= PRECISION else 0.0
            if latency > 0 or action.rate > 0:
                continue
            left = 0.0
        elif action.rate > 0:
            left = action.remaining - action.rate * delta
            if left < bytes_precision:
                left = 0.0
            action.remaining = left
        else:
            left = 0.0
        if left <= 0.0:
            action.done = True
            ended.append((action.order, action))
    if len(ended) > 1:
        ended.sort(key=_first)
    ready = self._ready
    for _, what in ended:
        if isinstance(what, Actor):
            if what.alive:
                ready.append(what)
            continue
        actor, receiver = what.actor, what.receiver
        if receiver is None:
            if what.ended:
                continue
            what.ended = True
            if what.sleep >= 0:
                self._sleeps.remove(what.sleep)
                what.sleep = -1
            elif not what.done:
                if what.elements:
                    actor.zombie = what
                else:
                    what.done = True
                actor.answer = TIMED_OUT
            actor.action = None
            if actor.alive:
                ready.append(actor)
        else:
            ready.append(actor)
            receiver.answer = what.payload
            ready.append(receiver)
    return True


_ROUTE = ((0, 1.0),)  # one route object for messages of two bounds (the solver's memo)
# links: id -> (bandwidth, fatpipe); hosts' CPUs for the parallel tasks
_LINKS = {0: (1.25e8, False), 1: (1e10, True), 2: (3.3e3, False), "cpu": (1e9, False)}
_COSTS = [
    (0.0, 1e10),  # the master's loopback, no link (the link-free platforms)
    (0.0, 0.0),  # no route: no time
    (6e-4, 1.25e8, ((0, 1.0), (1, 1.0)), 4194304.0 / 1.2e-3),  # a cluster's route
    (1.5e-5, 1e10, ((1, 1.0),), 4194304.0 / 3e-5),  # a loopback link
    (2e-10, 3.3e3, ((2, 1.0),), 0.0),  # slow, unbounded
    (5e-10, 0.0, (), 0.0),  # latency, no link
    (1e-5, 2.0, ((0, 0.0),), 0.0),  # a link crossed with weight 0
    (0.0, 1.25e8, _ROUTE, 0.0),  # a link, no latency: it shares from the start
    (0.0, 3.3e3, ((2, 1.0),), 0.0),  # the same, slow
    (0.0, 1e3, _ROUTE, 1e3),  # the same route, bounded
]
_TASKS = [  # computations: plain rates, and parallel tasks sharing the links and a CPU
    1.0,
    1e4,
    1666.6666,
    Ptask(0.0, (("cpu", 1e9), (0, 5e7)), 0.0, 0.4),
    Ptask(6e-4, (("cpu", 2e9), (0, 1e8), (2, 10.0)), 0.0, 0.5),
    Ptask(1e-5, (("cpu", 0.0),), 0.0, 1.0),  # nothing to do after its latency
]
_kernel_op = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 1), st.integers(0, len(_COSTS) - 1)),
    st.tuples(st.just("get"), st.integers(0, 1)),
    st.tuples(
        st.just("sleep"),
        st.sampled_from([1e-10, 5e-10, 1e-5, 1.49995e-5, 6e-4, 5.999995e-4, 6.00001e-4, 0.25, 3.0]),
    ),
    st.tuples(st.just("exec"), st.integers(0, len(_TASKS) - 1)),
    st.tuples(st.just("timeout"), st.integers(0, len(_TASKS) - 1), st.sampled_from([6e-4, 1.0])),
    st.tuples(st.just("create"), st.integers(0, 1), st.integers(0, len(_COSTS) - 1)),
    st.tuples(st.just("kill"), st.integers(0, 3)),
    st.tuples(st.just("share"), st.sampled_from([0, 2, "cpu"]), st.sampled_from([7.5e7, 2e9])),
)


def _stepper(kernel, boxes, actors, log, name, program):
    for index, op in enumerate(program):
        answer = None
        if op[0] == "put":
            answer = yield (BY_NAME_THEN, (PUT, boxes[op[1]], (name, index), _COSTS[op[2]]))
        elif op[0] == "get":
            answer = yield (BY_NAME_THEN, (GET, boxes[op[1]]))
        elif op[0] == "sleep":
            yield (SLEEP, op[1])
        elif op[0] == "exec":
            yield (EXEC, _TASKS[op[1]])
        elif op[0] == "timeout":
            answer = yield (EXEC_TIMEOUT, _TASKS[op[1]], op[2])
        elif op[0] == "kill":
            if op[1] < len(actors) and actors[op[1]].name != name:
                yield (KILL, actors[op[1]])
        elif op[0] == "share":  # a capacity changed (a parallel task's hosts, links)
            kernel.share({op[1]: (op[2], False)})
        else:  # a child that sends one message
            child = [("put", op[1], op[2])]
            code = _stepper(kernel, boxes, actors, log, f"{name}.{index}", child)
            made = yield (CREATE, code, "c")
            answer = made.name
        log.append((name, index, kernel.clock, answer))


def _play(programs, shared: bool):
    kernel = Kernel()
    if shared:
        kernel.constraints = dict(_LINKS)
    else:
        kernel.share = lambda capacities: None  # type: ignore[method-assign]
    boxes = [Mailbox(str(i)) for i in range(2)]
    log: list = []
    actors: list = []
    for number, program in enumerate(programs):
        code = _stepper(kernel, boxes, actors, log, f"a{number}", program)
        actors.append(kernel.spawn(code, f"a{number}"))
    assert kernel.run() is None
    return log, kernel.clock, kernel.steps


@settings(max_examples=500, deadline=None)
# a sleep ends 0.5 ns before a message's latency is paid: the 0.5 ns left is nothing
@example(
    programs=[[("put", 0, 2)], [("get", 0)], [("sleep", 5.999995e-4)]], shared=True, numpy_from=0
)
# a sleep ends 1e-16 of the byte before its end (below SimGrid's 1e-14): the byte is done
@example(
    programs=[[("put", 0, 4)], [("get", 0)], [("sleep", 0.00030303050303030294)]],
    shared=True,
    numpy_from=0,
)
# two messages share a link, the first one's end changes the second one's rate
@example(
    programs=[[("put", 0, 7), ("put", 0, 7)], [("get", 0), ("sleep", 1e-5), ("get", 0)]],
    shared=True,
    numpy_from=0,
)
# a message without latency starts while another crosses the same link: both halved
@example(
    programs=[[("put", 0, 8)], [("sleep", 1e-5), ("put", 1, 8)], [("get", 0)], [("get", 1)]],
    shared=True,
    numpy_from=0,
)
# one route, two bounds, one message after the other
@example(
    programs=[[("put", 0, 7), ("put", 0, 9)], [("get", 0), ("get", 0)]], shared=True, numpy_from=0
)
# a link's capacity changes while a message crosses it
@example(
    programs=[[("put", 0, 7)], [("get", 0)], [("sleep", 1e-10), ("share", 0, 7.5e7)]],
    shared=True,
    numpy_from=0,
)
@given(
    programs=st.lists(st.lists(_kernel_op, max_size=8), min_size=1, max_size=4),
    shared=st.booleans(),
    numpy_from=st.sampled_from([0, 128]),
)
def test_steps_are_simgrids_solve_one_step_per_call_solved_each_step(programs, shared, numpy_from):
    """_advance (steps that wake nobody followed in its own loop, the shares solved
    again only when an action past its latency began or ended or a capacity changed,
    a step that ends no sleep subtracted from numpy's array in place)
    against the oracle above, one step per call as run() takes them and every share
    solved at every step: the same progress of every actor, answers, clock (to the bit)
    and number of steps, on random actor programs — messages with and without links
    sharing them, parallel tasks with latency, timeouts (zombies), kills, capacities
    changed mid-run, sleeps ending with a latency or 1e-10 s apart — the pending sleeps
    a list of floats or (``numpy_from`` 0) numpy's array from the first."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Sleeps, "NUMPY_FROM", numpy_from)
        fast = _play(programs, shared)
        patch.setattr(Kernel, "_advance", _advance_every_step)
        oracle = _play(programs, shared)
    assert fast == oracle


# --- the pending sleeps in the order they end, against every remainder searched -------------

_remainder = st.sampled_from(
    [1e-10, 5e-10, 1e-9, 1.5e-9, 6e-4, 6.000000001e-4, 0.25, 1.0, 3.0, 3.0000000005, 1e4]
)
_sleeps_op = st.one_of(
    st.tuples(st.just("add"), _remainder),
    st.tuples(st.just("remove"), st.integers(0, 50)),
    st.tuples(st.just("set"), st.integers(0, 50), _remainder),
    # a step: to the smallest end, a part of it, or just short of it (within 1e-9)
    st.tuples(st.just("step"), st.sampled_from([1.0, 0.5, 0.999999, 1e-3, 0.0])),
)


@settings(max_examples=400, deadline=None)
@given(ops=st.lists(_sleeps_op, max_size=60), numpy_from=st.sampled_from([2, 128]))
def test_the_pending_sleeps_end_as_every_remainder_subtracted_and_searched(ops, numpy_from):
    """_Sleeps keeps its sleeps smallest remainder first and reads the smallest and the
    ended ones from the front: the same smallest remainder (to the bit) and the same
    sleeps ended at every step as one subtraction per remainder and a search of them
    all (a remainder below 1e-9 is nothing), as a list of floats and as numpy's array."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Sleeps, "NUMPY_FROM", numpy_from)
        sleeps = _Sleeps()
        reference: dict[int, float] = {}  # order -> remainder
        slots: dict[int, int] = {}  # order -> slot
        owners: dict[int, Actor] = {}
        for number, op in enumerate(ops):
            pending = sorted(reference)
            if op[0] == "add":
                owner = owners[number] = Actor(iter(()), str(number))
                slots[number] = owner.sleep = sleeps.add(owner, op[1], number)
                reference[number] = op[1]
            elif op[0] in ("remove", "set") and pending:
                order = pending[op[1] % len(pending)]
                if op[0] == "remove":
                    sleeps.remove(slots.pop(order))
                    del reference[order]
                else:
                    sleeps.set(slots[order], op[2])
                    reference[order] = op[2]
            elif op[0] == "step":
                smallest = min(reference.values(), default=float("inf"))
                assert sleeps.next() == smallest
                if not reference:
                    continue
                delta = smallest * op[1] if op[1] != 0.0 else max(smallest - 5e-10, 0.0)
                ended = sorted(order for order, _ in sleeps.advance(delta))
                expected = []
                for order in sorted(reference):
                    left = reference[order] - delta
                    if left < PRECISION:
                        expected.append(order)
                        del reference[order]
                        del slots[order]
                    else:
                        reference[order] = left
                assert ended == expected
        assert sleeps.next() == min(reference.values(), default=float("inf"))
        assert sleeps.count == len(reference)
        for order, slot in slots.items():
            assert float(sleeps.remaining[slot]) == reference[order]
