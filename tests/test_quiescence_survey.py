"""Quiescence.survey_locked: the driver's one pass answers what the two checks it
replaces answer (the processes not quiescent, the next readers to let go, the
``_flushing`` note), whatever the processes and their API connections."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.clock.quiescence import Quiescence
from broker.clock.registry import ProcessState, Registry

STATES = ["idle", "busy", "ready", "streaming", "flushing", "held", True, False]

_conn = st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from(STATES))
_rarely = st.sampled_from([False, False, False, True])  # most processes wait, connected
_proc = st.fixed_dictionaries(
    {
        "gone": _rarely,
        "connected": _rarely.map(lambda b: not b),
        "busy": _rarely,
        "unacked": _rarely,
        "io": st.lists(_conn, max_size=4),
    }
)


def _word(state: object) -> str:
    """A checker's answer as ``Quiescence._io_state_locked`` reads it."""
    return {True: "idle", False: "busy"}.get(state, state)  # type: ignore[call-overload]


def _quiescence(
    procs: list[dict[str, Any]],
    deterministic: bool,
    flushing: bool,
    questions: list[int] | None = None,
) -> Quiescence:
    """``questions``: ask each process's rows at once (the facade's ``connection_states``),
    appending how many rows each question held."""
    cond = threading.Condition()
    registry = Registry(cond)
    states: dict[int, object] = {}
    port = 40000
    for i, spec in enumerate(procs):
        proc = ProcessState(name=f"p{(i * 7) % 5}{i}")
        proc.gone = spec["gone"]
        proc.identity = b"x" if spec["connected"] else None
        proc.busy = spec["busy"]
        proc.sent, proc.ack = (2, 1) if spec["unacked"] else (1, 1)
        for sent, seq, state in spec["io"]:
            port += 1
            states[port] = state
            proc.io.append([port, sent, sent, seq])
        registry.procs[proc.name] = proc
    q = Quiescence(
        cond,
        registry,
        cast(Any, None),
        cast(Any, None),
        deterministic=deterministic,
        now=lambda: 0,
    )
    if questions is None:
        q.set_io_checker(lambda p, _s, _c: cast(Any, states[p]))
    else:

        def batch(rows: list[list[int]]) -> list[str]:
            questions.append(len(rows))
            return [_word(states[row[0]]) for row in rows]

        q.set_io_checker(lambda p, _s, _c: pytest.fail("asked one row at a time"), None, batch)
    q._flushing = flushing
    return q


@pytest.mark.parametrize("batched", [False, True])
@settings(max_examples=400, deadline=None)
@given(procs=st.lists(_proc, max_size=4), deterministic=st.booleans(), flushing=st.booleans())
def test_survey_answers_what_the_two_checks_answer(procs, deterministic, flushing, batched) -> None:
    questions: list[int] = []
    a = _quiescence(procs, deterministic, flushing, questions if batched else None)
    b = _quiescence(procs, deterministic, flushing)
    busy, release = a.survey_locked()
    expect_busy = [p.name for p in b._procs.values() if not b.quiescent_locked(p)]
    expect_release = b._next_release_locked()
    assert [p.name for p in busy] == expect_busy
    if expect_release is None:
        assert release is None
    else:
        assert release is not None
        assert (release[0].name, release[1]) == (expect_release[0].name, expect_release[1])
    assert a._flushing == b._flushing
    # batched: at most one question per process, each with all of its rows
    assert all(n > 0 for n in questions)
    assert len(questions) <= len([p for p in b._procs.values() if p.io])
    if batched:  # the release chosen alone (a report's or the facade's word) is the same
        c = _quiescence(procs, deterministic, flushing, [])
        release = c._next_release_locked()
        assert (release and (release[0].name, release[1])) == (
            expect_release and (expect_release[0].name, expect_release[1])
        )
        assert c._flushing == b._flushing


@settings(max_examples=200, deadline=None)
@given(st.lists(_proc, max_size=4), st.booleans())
def test_a_state_report_asks_the_ledger_once_and_hears_the_same(procs, busy) -> None:
    """``report_locked``: the wait listeners hear of an idle process with every connection
    parked, asking the ledger one question for the report, as when asked row by row."""
    heard: dict[bool, list[str]] = {False: [], True: []}
    for batched in (False, True):
        questions: list[int] = []
        q = _quiescence(procs, True, False, questions if batched else None)
        q.add_wait_listener(heard[batched].append)
        for proc in list(q._procs.values()):
            q.report_locked(
                proc,
                {"busy": busy, "ack": 0, "io": proc.io, "runnable": 0, "blocked": 0, "detached": 0},
            )
        if batched:
            assert questions == [len(p.io) for p in q._procs.values() if p.io and not busy]
    assert heard[True] == heard[False]


def test_survey_lets_the_first_process_by_name_go_responses_first() -> None:
    procs = [
        {"gone": False, "connected": True, "busy": False, "unacked": False, "io": io}
        for io in ([(1, 2, "streaming"), (1, 1, "ready")], [(0, 0, "ready")])
    ]
    q = _quiescence(procs, deterministic=True, flushing=False)
    busy, release = q.survey_locked()
    assert [p.name for p in busy] == ["p00", "p21"]
    assert release is not None
    assert release[0].name == "p00" and release[1] == [40002, 40001]


def test_a_request_in_flight_anywhere_lets_no_reader_go() -> None:
    procs = [
        {"gone": False, "connected": True, "busy": False, "unacked": False, "io": io}
        for io in ([(1, 1, "ready")], [(0, 0, "busy")])
    ]
    q = _quiescence(procs, deterministic=True, flushing=False)
    busy, release = q.survey_locked()
    assert [p.name for p in busy] == ["p00", "p21"]
    assert release is None
