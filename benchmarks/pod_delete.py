"""CPU of the broker's own pod deletions (the terminated-pod GC's), before and after
``Store.remove`` (issue 29, s7-bgrow).

    .venv/bin/python benchmarks/pod_delete.py [--pods 3000] [--repeat 3]

A real pod (bound, Succeeded: one of a small in-process run's, ``InProcessRun``) is
stored ``--pods`` times under new names, then each is deleted as
``ControllerPods.delete_controlled_pod`` did (``get_or_none`` then ``delete``: two
decodes of the pod) and as it does now (``Store.remove``: none); the two ways
alternate, ``--repeat`` rounds of each (A B A B). Prints CPU µs per deleted pod
(``time.process_time``). No watcher is open: in a run the DELETED event's fan-out to the
scheduler's watch comes on top, the same for both.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.drivers.inprocess import InProcessRun  # noqa: E402

PROFILES = {"d": {"type": "delay", "delay": 7, "cpu": "1", "scheduler": "default"}}
JOBS = [{"id": "0", "subtime": 0, "res": 1, "profile": "d", "walltime": 100}]
_KEPT = ("labels", "annotations", "ownerReferences")


def one_round(store, proto: dict, pods: int, old: bool) -> float:
    """CPU µs per pod to delete ``pods`` copies of ``proto``, the old way or the new."""
    namespace = proto["metadata"]["namespace"]
    for i in range(pods):
        pod = copy.deepcopy(proto)
        pod["metadata"] = {k: v for k, v in pod["metadata"].items() if k in _KEPT}
        pod["metadata"].update(name=f"bench-{i}", namespace=namespace)
        store.create("pods", pod, copy=False)
    started = time.process_time()
    for i in range(pods):
        name = f"bench-{i}"
        if old:
            store.get_or_none("pods", namespace, name)
            store.delete("pods", namespace, name)
        else:
            store.remove("pods", namespace, name)
    return 1e6 * (time.process_time() - started) / pods


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tw-pod-delete-") as tmp:
        world = InProcessRun(Path(tmp), nodes=1, cores=1)
        try:
            world.run(JOBS, PROFILES)
            namespace, name = next(iter(world.cluster.pods))
            proto = world.store.get("pods", namespace, name)
            got: dict[str, list[float]] = {"get_or_none + delete": [], "remove": []}
            for _ in range(args.repeat):
                got["get_or_none + delete"].append(one_round(world.store, proto, args.pods, True))
                got["remove"].append(one_round(world.store, proto, args.pods, False))
        finally:
            world.close()
    for label, values in got.items():
        print(f"{label}: CPU µs per pod, in order: " + ", ".join(f"{v:.1f}" for v in values))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
