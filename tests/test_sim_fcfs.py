"""The reference FCFS's free-capacity tree: its first fit is the linear scan's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.fcfs import _FreeTree

_capacity = st.sampled_from([0.5, 1.0, 1.0, 2.0, 4.0, 0.188])
_demand = st.sampled_from([0.1, 0.188, 0.25, 0.5, 1.0, 1.0 - 5e-10, 1.0 + 5e-10, 2.0, 3.0])


def _scan(tree: _FreeTree, demand: float, start: int) -> int:
    return next((r for r in range(start, len(tree.capacity)) if tree.fits(r, demand)), -1)


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.lists(_capacity, min_size=1, max_size=40),
    steps=st.lists(st.tuples(_demand, st.integers(0, 45), st.booleans()), max_size=60),
)
def test_first_fit_is_the_lowest_resource_with_room(capacity, steps):
    tree = _FreeTree(capacity)
    placed: list[tuple[int, float]] = []
    for demand, start, release in steps:
        if release and placed:
            rid, amount = placed.pop(start % len(placed))
            tree.add(rid, -amount)
        start %= len(capacity) + 1
        rid = tree.first_fit(demand, start)
        assert rid == _scan(tree, demand, start)
        if rid >= 0:
            tree.add(rid, demand)
            placed.append((rid, demand))
