"""``commands.simulating.heap.settle``: the start-up heap leaves the collector's walks,
collections run less often, and cycles made afterwards are still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from commands.simulating import heap


@pytest.fixture
def settled() -> Iterator[None]:
    before = gc.get_threshold()
    try:
        heap.settle()
        yield
    finally:
        gc.unfreeze()  # the test process's heap back to the collector
        gc.set_threshold(*before)


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settle_collects_start_up_garbage_then_freezes() -> None:
    before = gc.get_threshold()
    gone = _cycle()  # start-up garbage: collected, not frozen
    try:
        heap.settle()
        assert gone() is None
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == heap.GEN0_THRESHOLD
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_cycles_made_after_settling_are_still_collected(settled: None) -> None:
    """The collector's own thresholds, no explicit collect: allocate until it ran."""
    dead = _cycle()
    runs = [0]

    def count(phase: str, info: dict) -> None:
        if phase == "stop":
            runs[0] += 1

    gc.callbacks.append(count)
    try:
        keep = []
        for _ in range(200):  # bounded: a few collections' worth of allocations
            keep.append([[] for _ in range(heap.GEN0_THRESHOLD)])
            if dead() is None and runs[0]:
                break
            keep.clear()
    finally:
        gc.callbacks.remove(count)
    assert runs[0] > 0, "the collector never ran on its own"
    assert dead() is None, "a cycle made after settling was never collected"


def test_freeze_cluster_freezes_what_was_made_after_settling(settled: None) -> None:
    """The cluster's objects, made at SIMULATION_BEGINS after ``settle``, leave the
    collector's walks too."""
    frozen = gc.get_freeze_count()
    cluster = [["node", i] for i in range(1_000)]  # lists: always tracked by the collector
    heap.freeze_cluster()
    assert gc.get_freeze_count() >= frozen + len(cluster)
    assert gc.isenabled()
