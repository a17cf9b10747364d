"""Writes pods.csv and nodes.csv in the format of Alibaba's GPU cluster trace
(clusterdata, cluster-trace-gpu-v2023: ``openb_pod_list_*.csv`` and
``openb_node_list_*.csv``) for a made-up cluster: 12 nodes (4 CPU-only, 6 with 8 V100s,
2 with 2 T4s) and 300 pods over two hours, many on a fraction of a GPU. Seeded: the same
script writes the same bytes (tests/test_cluster_import.py checks the committed files).

    python examples/inputs/alibaba_gpu/generate.py
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

rng = random.Random(2023)
HERE = Path(__file__).parent


def main() -> None:
    nodes = [(f"openb-node-{i:04d}", 96000, 786432, 0, "") for i in range(4)]
    nodes += [(f"openb-node-{i:04d}", 96000, 393216, 8, "V100M32") for i in range(4, 10)]
    nodes += [(f"openb-node-{i:04d}", 64000, 262144, 2, "T4") for i in range(10, 12)]
    with open(HERE / "nodes.csv", "w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle, lineterminator="\n")
        out.writerow(["sn", "cpu_milli", "memory_mib", "num_gpu", "model"])
        out.writerows(nodes)
    rows = []
    for i in range(300):
        created = int(7200 * rng.random())
        kind = rng.random()
        if kind < 0.3:  # CPU only
            num_gpu, gpu_milli, spec = 0, 0, ""
        elif kind < 0.75:  # a share of one GPU
            num_gpu, gpu_milli = 1, rng.choice([100, 250, 300, 500, 700])
            spec = rng.choice(["", "", "V100M32", "T4"])
        else:  # whole GPUs
            num_gpu, gpu_milli, spec = rng.choice([1, 2, 4, 8]), 1000, rng.choice(["", "V100M32"])
        cpu = rng.choice([2000, 4000, 6000, 8000, 12000, 16000])
        memory = rng.choice([4096, 8192, 16384, 30720, 61440])
        scheduled = created + rng.randrange(0, 30)
        lifetime = max(60, int(rng.lognormvariate(6.5, 1.0)))
        deletion = scheduled + lifetime if scheduled + lifetime < 9000 else ""
        qos = rng.choice(["LS", "BE", "Burstable", "Guaranteed"])
        phase = "Running" if deletion == "" else rng.choice(["Succeeded", "Succeeded", "Failed"])
        rows.append(
            [
                f"openb-pod-{i:04d}",
                cpu,
                memory,
                num_gpu,
                gpu_milli,
                spec,
                qos,
                phase,
                created,
                deletion,
                scheduled,
            ]
        )
    rows.sort(key=lambda r: (r[8], r[0]))
    with open(HERE / "pods.csv", "w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle, lineterminator="\n")
        out.writerow(
            [
                "name",
                "cpu_milli",
                "memory_mib",
                "num_gpu",
                "gpu_milli",
                "gpu_spec",
                "qos",
                "pod_phase",
                "creation_time",
                "deletion_time",
                "scheduled_time",
            ]
        )
        out.writerows(rows)


if __name__ == "__main__":
    main()
