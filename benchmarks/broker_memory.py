"""What the broker holds, by owner, and its RSS against the pods that ended (issue 29).

    .venv/bin/python benchmarks/broker_memory.py --nodes 1000 --pods 20000 --census 5000 15000
    .venv/bin/python benchmarks/broker_memory.py --nodes 300 --pods 6000 --threshold 500

One ``timewarp simulate -q --no-plots`` with ``default_like`` on the synthetic inputs of
``experiments/scale.py`` (N one-core nodes, Poisson arrivals at 80 %), run *in this
process* so that a sampling thread can look inside the broker (the embedded simulator
runs in it too; the scheduler is a child process as always). Investigation only: the
run's outputs are the same as from the command. Unlike the command, the run leaves the
process's cyclic GC as it is (no ``heap.settle``: ``commands/cli.py`` ``entry`` does not
run; objects frozen there would be out of ``gc.get_objects``' reach, hence the census's).

- **The curve**: every ``--every`` seconds, the process's ``VmRSS``/``VmHWM`` with the
  number of pods that ended (the cluster's ``ended_job_ids``), the pods and Events stored and the
  Events' bookkeeping; printed as a table (every ``--rows``-th sample) at the end.
- **The census** when ``--census`` counts of ended pods are reached: under the store's
  lock, the deep size (``sys.getsizeof`` of everything reachable, each object counted
  once, for the first owner that reaches it) of each owner — the store's tables by kind,
  its watch history, the Events' expiry deadlines, the repeat-Event tracker, the
  watchers' queues, the cluster's state, the embedded simulator — and what is left of
  the RSS (the interpreter and its modules, threads, the allocators' free space), with
  glibc's heap in use and free. A census allocates (the list of every object, the set of
  those seen: ~150-280 MiB at 10k nodes) and the RSS keeps some of it: the peak and the
  curve after a census are the census's; take the curve from a run without one.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import sys
import tempfile
import threading
import time
import types
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.cluster.state import ClusterState  # noqa: E402
from experiments._common import DEFAULT_LIKE, load_average, print_table, simulate_command  # noqa: E402
from experiments.scale import synthetic_inputs  # noqa: E402
from simulator.engine import Simulator  # noqa: E402

_KIB = 1024
# what a deep size does not follow: code, classes and modules are the interpreter's
_LEAVES = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.CodeType,
    types.FrameType,
    threading.Thread,
)


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def deep_size(root: Any, seen: set[int]) -> int:
    """Bytes of everything reachable from ``root`` not in ``seen`` (which it extends)."""
    total, stack = 0, [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _LEAVES):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, (str, bytes, int, float, bool, type(None))):
            continue
        if isinstance(obj, dict):
            for k, v in list(obj.items()):
                stack.append(k)
                stack.append(v)
        elif isinstance(obj, (list, tuple, set, frozenset, deque)):
            stack.extend(list(obj))
        else:
            d = getattr(obj, "__dict__", None)
            if d is not None:
                stack.append(d)
            for cls in type(obj).__mro__:
                for slot in getattr(cls, "__slots__", ()):
                    if hasattr(obj, slot) and slot != "__dict__":
                        stack.append(getattr(obj, slot))
    return total


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]  # fmt: skip


def glibc_heap_kib() -> dict[str, int]:
    """glibc's heap (objects over 512 bytes: encoded pods and Events, big dicts): in use
    and free (chunks it keeps), KiB; empty where there is no ``mallinfo2``."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return {}
    fn.restype = _MallInfo2
    info = fn()
    return {"in use": info.uordblks // _KIB, "free": info.fordblks // _KIB}


def _pending(expiry: Any) -> int:
    """Deadlines the expiry holds, stale ones included (its queue, or its heap)."""
    return len(expiry._queue) + len(expiry._heap or ())


def _instances(cls: type) -> list[Any]:
    return [o for o in gc.get_objects() if isinstance(o, cls)]


def census() -> dict[str, Any]:
    """The broker's memory by owner, in KiB, with the counts of what each holds."""
    from broker.controllers import events as ev

    stores = [state.facade.store for state in _instances(ClusterState)]
    out: dict[str, Any] = {"rss_kib": _status_kib("VmRSS"), "owners": {}, "counts": {}}
    out["glibc_kib"] = glibc_heap_kib()
    seen: set[int] = {id(s) for s in stores}
    owners = out["owners"]
    for store in stores:
        with store._lock:
            for key, table in sorted(store._objects.items(), key=lambda kv: kv[0] != "nodes"):
                name = f"store: {key}"
                owners[name] = owners.get(name, 0) + deep_size(table, seen)
                out["counts"][key] = out["counts"].get(key, 0) + len(table)
            owners["store: watch history"] = deep_size((store._history, store._history_sizes), seen)
            owners["store: Events' expiry (heap + deadlines)"] = deep_size(store._expiry, seen)
            out["counts"]["expiry heap"] = _pending(store._expiry)
            out["counts"]["expiry deadlines"] = len(store._expiry)
            owners["store: watchers and their queues"] = deep_size(store._watchers, seen)
            owners["store: rest"] = deep_size(store.__dict__, seen)
    asides = list(ev._ASIDE.values())  # keyed by the store or a typed view of it
    owners["repeat-Event tracker (_Aside)"] = deep_size(asides, seen)
    out["counts"]["tracker known"] = sum(len(a.known) for a in asides)
    for label, cls in (("cluster state", ClusterState), ("embedded simulator", Simulator)):
        owners[label] = sum(deep_size(o, seen) for o in _instances(cls))
    owners = {k: v // _KIB for k, v in owners.items()}
    out["owners"] = owners
    out["rest_kib"] = out["rss_kib"] - sum(owners.values())
    return out


class Sampler(threading.Thread):
    """Samples the RSS with the run's progress; takes the census at the given counts."""

    def __init__(self, every_s: float, census_at: list[int]) -> None:
        super().__init__(daemon=True, name="memory-sampler")
        self.every_s = every_s
        self.census_at = sorted(census_at)
        self.samples: list[dict[str, Any]] = []
        self.censuses: list[tuple[int, dict[str, Any]]] = []
        self.stop = threading.Event()
        self._stores: list[Any] = []
        self._states: list[Any] = []

    def sample(self) -> None:
        from broker.controllers import events as ev

        ended = sum(len(s.ended_job_ids) for s in self._states)
        if not self._states:  # found once the run has made them: the cluster's store
            # (not a store made for a moment, e.g. to check the declared objects)
            self._states = _instances(ClusterState)
            self._stores = [state.facade.store for state in self._states]
        stores = self._stores
        row = {"t": time.monotonic(), "ended": ended, "rss_kib": _status_kib("VmRSS"),
               "hwm_kib": _status_kib("VmHWM")}  # fmt: skip
        for store in stores:
            row["pods"] = row.get("pods", 0) + len(store._objects.get("pods", ()))
            row["events"] = row.get("events", 0) + len(store._objects.get("events", ()))
            row["expiry_heap"] = row.get("expiry_heap", 0) + _pending(store._expiry)
        row["tracker"] = sum(len(a.known) for a in list(ev._ASIDE.values()))
        self.samples.append(row)
        while self.census_at and ended >= self.census_at[0]:
            self.census_at.pop(0)
            taken = census()
            self.censuses.append((ended, taken))
            print(f"census at {ended:,} ended: {json.dumps(taken)}", file=sys.stderr, flush=True)

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.sample()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--pods", type=int, default=6000)
    parser.add_argument(
        "--threshold", type=int, help="--terminated-pod-gc-threshold (default: the command's)"
    )
    parser.add_argument(
        "--census", type=int, nargs="*", default=[], help="ended pods at which to take it"
    )
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--rows", type=int, default=0, help="print every n-th sample (0: ~25 rows)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the samples and censuses here")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 1 or args.every <= 0:
        parser.error("--nodes and --pods must be >= 1, --every > 0")
    from commands.cli import main as timewarp_main

    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="tw-broker-memory-") as tmp:
        platform, workload = synthetic_inputs(
            Path(tmp) / "inputs", args.nodes, args.pods, args.seed
        )
        out = Path(tmp) / "out"
        extra = (
            [] if args.threshold is None else ["--terminated-pod-gc-threshold", str(args.threshold)]
        )
        cmd = simulate_command([DEFAULT_LIKE], platform, [workload], out, extra)
        sampler = Sampler(args.every, args.census)
        baseline = _status_kib("VmRSS")
        sampler.start()
        started = time.monotonic()
        code = timewarp_main(cmd[cmd.index("simulate") :])
        wall = time.monotonic() - started
        sampler.stop.set()
        sampler.join()
        sampler.sample()
    load_after = load_average()
    samples = sampler.samples
    step = args.rows or max(1, len(samples) // 25)
    headers = ["wall (s)", "pods ended", "RSS (MiB)", "peak RSS (MiB)", "pods stored",
               "Events stored", "expiry heap", "tracker"]  # fmt: skip
    rows = [
        [
            f"{s['t'] - started:.0f}",
            f"{s['ended']:,}",
            f"{s['rss_kib'] / _KIB:.1f}",
            f"{s['hwm_kib'] / _KIB:.1f}",
            f"{s.get('pods', 0):,}",
            f"{s.get('events', 0):,}",
            f"{s.get('expiry_heap', 0):,}",
            f"{s.get('tracker', 0):,}",
        ]  # fmt: skip
        for s in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    ]
    print(f"{args.nodes:,} nodes × {args.pods:,} pods, exit {code}, wall {wall:.1f} s; "
          f"RSS before the run {baseline / _KIB:.1f} MiB")  # fmt: skip
    print_table(headers, rows)
    for ended, taken in sampler.censuses:
        print(
            f"\ncensus at {ended:,} pods ended (RSS {taken['rss_kib'] / _KIB:.1f} MiB); "
            f"counts {taken['counts']}; glibc heap (KiB) {taken['glibc_kib']}"
        )
        table = [[k, f"{v / _KIB:.1f}"] for k, v in taken["owners"].items()]
        table.append(
            [
                "rest of the RSS (interpreter, modules, threads, free space)",
                f"{taken['rest_kib'] / _KIB:.1f}",
            ]
        )
        print_table(["owner", "MiB"], table)
    print(f"load before {load_before}; after {load_after}")
    if args.json:
        args.json.write_text(json.dumps({"samples": samples, "censuses": sampler.censuses,
                                         "baseline_kib": baseline, "wall_s": wall}, indent=1))  # fmt: skip
    return code


if __name__ == "__main__":
    raise SystemExit(main())
