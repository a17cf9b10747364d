"""The machine accounting's lazy credits (``MachineLog.lag`` folded by ``fold_credits``) give
the same long-double bits as the scalar path they replace: ``total += _LONG(now) -
_LONG(since)`` credit after credit."""

from __future__ import annotations

import numpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine import MACHINE_STATES, MachineLog, fold_credits

_LONG = numpy.longdouble

# simulation times as they come: large seconds with sub-microsecond offsets, and tiny ones,
# so that differences and sums round differently in double and in long double
_times = st.one_of(
    st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=10**7).map(lambda s: s + 1e-5 / 3),
    st.floats(min_value=0.0, max_value=1e-3, allow_nan=False),
)
_pairs = st.lists(st.tuples(_times, _times), max_size=60)


def _scalar(total: numpy.longdouble, pairs: list[tuple[float, float]]) -> numpy.longdouble:
    for now, since in pairs:
        total += _LONG(now) - _LONG(since)
    return total


def _bits(value: numpy.longdouble) -> bytes:
    return numpy.array([value], dtype=_LONG).tobytes()[:10]  # x87: 80 bits of 16 bytes


@settings(max_examples=300, deadline=None)
@given(start=_times, pairs=_pairs)
def test_fold_credits_is_the_scalar_sum(start: float, pairs: list[tuple[float, float]]) -> None:
    total = _LONG(start) / 3  # a long double that is not a double
    flat = [t for pair in pairs for t in pair]
    assert _bits(fold_credits(total, flat)) == _bits(_scalar(total, pairs))


@settings(max_examples=200, deadline=None)
@given(pairs=_pairs, cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=5))
def test_folding_in_pieces_is_folding_once(
    pairs: list[tuple[float, float]], cuts: list[int]
) -> None:
    log = MachineLog(spent=[dict.fromkeys(MACHINE_STATES, _LONG(0))])
    done = 0
    for cut in sorted(cuts) + [len(pairs)]:
        for now, since in pairs[done:cut]:
            log.lag[0]["idle"] += (now, since)
        done = max(done, cut)
        log.fold(0, "idle")
    assert _bits(log.spent[0]["idle"]) == _bits(_scalar(_LONG(0), pairs))
    assert log.time_in_state["idle"] == float(_scalar(_LONG(0), pairs))
