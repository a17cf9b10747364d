"""Python's cyclic GC in the broker process, tuned once, when start-up ends.

Measured at 300 nodes × 3,000 pods (gc.callbacks, thread CPU): the run's automatic
collections cost ~0.09 ms per pod and found **no** cyclic garbage in generations 0 and
1 — the broker's objects die by reference count; what survives is long-lived (stored
objects, histories). So the collector mostly walked the start-up heap (the inputs, the
nodes, imported modules) and young objects that will live on. Two changes, made by
``settle`` once:

- ``gc.collect()`` then ``gc.freeze()``: the heap built at start-up (its garbage
  collected first) leaves the collector's generations, so a gen-2 collection walks only
  what the run added;
- a gen-0 threshold of ``GEN0_THRESHOLD`` (Python's default: 700). What the run's
  collections examine is mostly the stored state of pods alive (~18 tracked objects
  each: dicts and lists of the pod's JSON, its store entry) and states a later write
  replaces; a young collection examines what is alive when it runs, so the rarer they
  are, the more of those states die unexamined. Objects examined per pod at 1k nodes ×
  10k pods (gc.callbacks, s8-gc): 121 at 5,000 (87 in gen-0 collections, 34 in gen-1),
  75 at 20,000, 57 at 50,000, 46 at 100,000, at which the broker's peak RSS rose 2 MiB
  (cyclic garbage waits longer for its collection: bounded by the threshold, not by the
  pods that ended).

**Where**: the one moment start-up is over and no pod exists yet — the broker's
``after_begin``, right after the first message's SIMULATION_BEGINS made the nodes (~13
tracked objects per node) and before that message's JOB_SUBMITTED events make the first
pods. Earlier, the nodes would go through the young generations and every gen-2 walk of
the run; later, per-pod objects would be frozen, and a frozen object that becomes
cyclic garbage is never collected: the broker's memory must stay flat in the pods that
ended (issue 29). Freezing once keeps that bound: only start-up's objects, once.

Cycles made during the run are still collected (the collector stays enabled, its
thresholds finite).
"""

from __future__ import annotations

import gc

GEN0_THRESHOLD = 50_000
# The process ends with the command (set by ``commands.cli.entry``): its heap is the
# command's to tune. A simulation run in a process that goes on (a test, a notebook)
# leaves that process's collector alone.
OWNED = False


def settle() -> None:
    """Collect, freeze what is left, and raise the gen-0 threshold (see the module's
    docstring); once, when start-up ends (the nodes exist, no pod yet)."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
