"""``commands.simulating.heap.settle``: the start-up heap leaves the collector's walks,
collections run less often, and cycles made afterwards are still collected; in a
``timewarp simulate`` process, once, when the nodes exist and before the first pod."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from commands.simulating import heap

ROOT = Path(__file__).resolve().parent.parent


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


# A ``timewarp simulate`` run as the command runs it (heap.OWNED, as ``cli.entry`` sets it),
# in a process of its own: it reports, from the facade's store, what was frozen.
_PROBE = """
import gc, json, sys
from broker.facade import store as store_module
from commands import cli
from commands.simulating import heap

stores, settled = [], []
made = store_module.Store.__init__
def capture(self, *args, **kwargs):
    made(self, *args, **kwargs)
    stores.append(self)
store_module.Store.__init__ = capture
settle = heap.settle
def spy():
    settle()
    settled.append({"nodes": stores[-1].count("nodes"), "pods": stores[-1].count("pods"),
                    "frozen": gc.get_freeze_count()})
heap.settle = spy
heap.OWNED = True
code = cli.main(sys.argv[1:])
store = stores[-1]
collected = {id(o) for o in gc.get_objects()}  # tracked and not frozen
def state(kind, namespace, name):
    obj = store.remove(kind, namespace, name)  # the stored state itself, shared
    return {"tracked": gc.is_tracked(obj), "frozen": id(obj) not in collected}
names = {kind: [(o["metadata"].get("namespace"), o["metadata"]["name"])
                for o in store.list(kind)[0]] for kind in ("nodes", "pods")}
print(json.dumps({"code": code, "settled": settled, "frozen_at_end": gc.get_freeze_count(),
                  "nodes": [state("nodes", ns, n) for ns, n in names["nodes"]],
                  "pods": [state("pods", ns, n) for ns, n in names["pods"]]}))
"""


def test_the_command_freezes_start_up_once_and_no_pod(tmp_path, subprocess_env) -> None:
    """What start-up made (the nodes' stored objects among it) is frozen, once, before the
    first pod; the pods' stored states stay in the collector's generations (a frozen
    object that becomes cyclic garbage is never freed: memory would grow with the pods
    that ended), and nothing is frozen after start-up."""
    inputs = ROOT / "examples/inputs"
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, "simulate", "-q", "--no-plots",
         "--scheduler", "python -m sample_schedulers.default_like --scheduler-name default",
         "-p", inputs / "cluster16.xml", "-w", inputs / "burst_40_delay170.json",
         "-o", tmp_path],
        capture_output=True, text=True, env=subprocess_env, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["code"] == 0
    assert len(seen["settled"]) == 1, "start-up is frozen once"
    (settled,) = seen["settled"]
    assert settled["nodes"] == 16 and settled["pods"] == 0
    assert len(seen["nodes"]) == 16
    assert all(n["tracked"] and n["frozen"] for n in seen["nodes"])
    assert len(seen["pods"]) == 40
    assert all(p["tracked"] and not p["frozen"] for p in seen["pods"])
    assert seen["frozen_at_end"] <= settled["frozen"], "something was frozen after start-up"
