"""CPU of the terminated-pod GC's passes at its default threshold (issue 29, s5-nodes).

    .venv/bin/python benchmarks/podgc_pass.py [--threshold 12500] [--per-pass 13] [--passes 500]

The controller alone (``broker/controllers/terminated_gc.py``), fed as the store's
listener feeds it: ``--threshold`` pods terminated first, then, each pass, ``--per-pass``
more (a pod's Running commit, then its Succeeded one) and a pass that deletes the
surplus (the deletion reaches the listener, as the store's would). 13 a pass is what a
500-node cluster at 80 % load ends every 20 s (0.67 pods/s); 267 a 10k-node one.
Prints CPU µs per pass and per pod collected (``time.process_time``, min / median / max
over ``--repeat`` rounds); run it with each checkout's PYTHONPATH, alternated, to compare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.controllers.terminated_gc import CHECK_PERIOD_NS, TerminatedPodGC  # noqa: E402
from broker.facade.objects import format_time  # noqa: E402


class _Clock:
    now = 0

    def now_ns(self) -> int:
        return self.now


class _Pods:
    gc: TerminatedPodGC

    def delete_controlled_pod(self, namespace: str, name: str) -> None:
        self.gc._on_change("pods", "DELETED", {"metadata": {"name": name, "namespace": namespace}})


def _pod(i: int, phase: str) -> dict:
    meta = {"name": f"pod-{i}", "namespace": "default", "creationTimestamp": format_time(i * 10**9)}
    return {"metadata": meta, "status": {"phase": phase}}


def one_round(threshold: int, per_pass: int, passes: int) -> tuple[float, int]:
    """CPU seconds of ``passes`` passes (the pods' commits included), pods collected."""
    clock, pods = _Clock(), _Pods()
    gc = pods.gc = TerminatedPodGC(None, clock, pods)  # fed by hand, never started
    gc.threshold = threshold
    for i in range(threshold):
        gc._on_change("pods", "MODIFIED", _pod(i, "Succeeded"))
    n = threshold
    started = time.process_time()
    for _ in range(passes):
        for i in range(n, n + per_pass):
            gc._on_change("pods", "MODIFIED", _pod(i, "Running"))
            gc._on_change("pods", "MODIFIED", _pod(i, "Succeeded"))
        n += per_pass
        clock.now += CHECK_PERIOD_NS
        gc.reconcile()
    return time.process_time() - started, gc.collected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=int, default=12_500)
    parser.add_argument("--per-pass", type=int, default=13)
    parser.add_argument("--passes", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    per_pass_us, per_pod_us = [], []
    for _ in range(args.repeat):
        cpu, collected = one_round(args.threshold, args.per_pass, args.passes)
        assert collected == args.per_pass * args.passes, collected
        per_pass_us.append(1e6 * cpu / args.passes)
        per_pod_us.append(1e6 * cpu / collected)

    def spread(xs: list[float]) -> str:
        return f"{min(xs):.1f} / {statistics.median(xs):.1f} / {max(xs):.1f}"

    print(f"threshold {args.threshold}, {args.per_pass} pods a pass, {args.passes} passes")
    print(f"CPU µs per pass (min / median / max): {spread(per_pass_us)}")
    print(f"CPU µs per pod collected: {spread(per_pod_us)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
