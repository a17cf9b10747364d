"""benchmarks/broker_memory.py's census: each object is counted once, for the first owner
that reaches it, and code is not followed (the figures of docs/benchmarks.md rest on it)."""

from __future__ import annotations

import sys

from benchmarks.broker_memory import deep_size


def test_a_shared_object_counts_for_its_first_owner_only():
    shared = ["x" * 1000]
    a, b = {"k": shared}, {"k": shared}
    seen: set[int] = set()
    first, second = deep_size(a, seen), deep_size(b, seen)
    assert first >= sys.getsizeof("x" * 1000) + sys.getsizeof(shared)
    assert second == sys.getsizeof(b)  # the key "k" is one interned string: seen


def test_slots_and_attributes_are_followed_but_not_functions_or_classes():
    class Slotted:
        __slots__ = ("payload",)

        def __init__(self) -> None:
            self.payload = b"y" * 5000

    class Plain:
        def __init__(self) -> None:
            self.slotted = Slotted()
            self.fn = test_a_shared_object_counts_for_its_first_owner_only

    size = deep_size(Plain(), set())
    assert sys.getsizeof(b"y" * 5000) < size < sys.getsizeof(b"y" * 5000) + 2000
