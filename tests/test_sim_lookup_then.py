"""``BY_NAME_THEN``: an actor's mailbox lookup and its put or get in one yield, the kernel
playing the two simcalls without resuming the generator in between (and, when the
actor would run alone in the next sub-round, running that sub-round at once). Pinned to
the general path — the same actors yielding ``BY_NAME`` then the call, two resumptions,
two sub-rounds — on random actor programs and on the engine's seeded scenarios."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from realbatsim import run_embedded, scenario

from simulator import kernel as k


def unfolded(code: Any) -> Any:
    """``code`` with every ``(BY_NAME_THEN, call)`` played as two simcalls (the general
    path), children created by it too."""
    answer = None
    while True:
        try:
            call = code.send(answer)
        except StopIteration:
            return
        if call[0] == k.BY_NAME_THEN:
            yield (k.BY_NAME,)
            answer = yield call[1]
        elif call[0] == k.CREATE:
            answer = yield (k.CREATE, unfolded(call[1]), call[2])
        else:
            answer = yield call


class _UnfoldedActor(k.Actor):
    __slots__ = ()

    def __init__(self, code: Any, name: str) -> None:
        super().__init__(unfolded(code), name)


# --- random actor programs on the kernel alone ------------------------------------------

_COSTS = [(0.0, 1e10), (0.0, 0.0), (1.5e-5, 1.25e8), (2e-10, 1e10)]
_op = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 2), st.integers(0, 3)),
    st.tuples(st.just("get"), st.integers(0, 2)),
    st.tuples(st.just("sleep"), st.sampled_from([0.0, 1e-10, 5e-10, 1e-5, 0.25, 1.0, 3.0])),
    st.tuples(st.just("lookup")),
    st.tuples(st.just("create"), st.integers(0, 2), st.integers(0, 3)),
)
_programs = st.lists(st.lists(_op, max_size=8), min_size=1, max_size=5)


def _actor(kernel: k.Kernel, boxes: list[k.Mailbox], log: list, name: str, program: list):
    for index, op in enumerate(program):
        answer: Any = None
        if op[0] == "put":
            answer = yield (k.BY_NAME_THEN, (k.PUT, boxes[op[1]], (name, index), _COSTS[op[2]]))
        elif op[0] == "get":
            answer = yield (k.BY_NAME_THEN, (k.GET, boxes[op[1]]))
        elif op[0] == "sleep":
            if op[1] > 0:
                yield (k.SLEEP, op[1])
        elif op[0] == "lookup":
            yield (k.BY_NAME,)
        else:  # a child that sends one message, created before its creator runs on
            child = [("put", op[1], op[2])]
            made = yield (k.CREATE, _actor(kernel, boxes, log, f"{name}.{index}", child), "c")
            answer = made.name
        log.append((name, index, kernel.clock, answer))


def _play(programs: list[list], general: bool) -> tuple[list, float, int]:
    kernel = k.Kernel()
    boxes = [k.Mailbox(str(i)) for i in range(3)]
    log: list = []
    for number, program in enumerate(programs):
        code = _actor(kernel, boxes, log, f"a{number}", program)
        kernel.spawn(unfolded(code) if general else code, f"a{number}")
    assert kernel.run() is None
    return log, kernel.clock, kernel.steps


@settings(max_examples=300, deadline=None)
@given(programs=_programs)
def test_a_lookup_then_a_call_in_one_yield_is_the_two_simcalls(programs):
    """Same order of every actor's progress, same answers, same clock, same time steps."""
    assert _play(programs, general=False) == _play(programs, general=True)


# --- the engine, on the seeded scenarios of the real-Batsim differential tests ----------


@pytest.mark.parametrize("seed", [*range(1, 25), 1121, 1142, 1936])
def test_the_engine_sends_the_same_messages_as_with_two_simcalls(tmp_path, monkeypatch, seed):
    """Random platforms, workloads and decisions (kills, calls, rejections, registrations,
    walltimes…): byte-identical messages and the same end either way."""
    sc = scenario(seed)
    fused = run_embedded(sc, seed, tmp_path)  # (the messages name the folder)
    monkeypatch.setattr(k, "Actor", _UnfoldedActor)
    general = run_embedded(sc, seed, tmp_path)
    assert fused == general
