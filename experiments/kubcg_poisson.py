"""KubCG's Poisson experiment (El Haj Ahmed et al. 2020, §6.3) in simulated time.

Usage: python experiments/kubcg_poisson.py [--rates 3 5 10 20 50] [--count 30]
           [--seeds 1 2 3] [-o out/kubcg_poisson]

For each rate λ (pods per 10 minutes) and seed, a KubCG-style workload (``timewarp
workload mixed``: one GPU-capable application, ``--gpu-on-gpu`` s on a GPU node,
``--gpu-on-cpu`` s on a CPU node, KubCG's sharing slowdown Θ_P = P) runs under
``timewarp simulate`` with ``default_like`` (kube-scheduler's essentials) and with
``kubcg``, on two platforms shaped like the paper's five workers: "CPU" (five CPU nodes)
and "CPU+GPU" (two 16-core CPU nodes, three 8-core nodes with one GPU). KubCG starts with
a history of the application's durations, as the paper's database after its 100 runs.
Prints mean turnaround (the paper's "time to complete each task": waiting + running),
min/max over seeds, and KubCG's gain.

Simulation model, stated: a job on a GPU node runs its GPU duration whatever slot KubCG
chose there (the simulator knows node classes, not slots); pods request 4 cores, so a
16-core CPU node shares among up to 4 pods (slowdown ×P) and an 8-core GPU node among 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sample_schedulers.kubcg.history import History  # noqa: E402
from simulator.generators import mixed, platform_xml  # noqa: E402

SCHEDULER_NAME = "kubcg"
IMAGE = "registry.example/app:cpu"


def platforms() -> dict[str, str]:
    cpu16 = {"core": "16", "memory": "12Gi", "node_class": "cpu"}
    cpu8 = {"core": "8", "memory": "16Gi", "node_class": "cpu"}
    gpu8 = {"core": "8", "memory": "16Gi", "node_class": "gpu", "gpu": "1"}
    return {
        "CPU": platform_xml(
            [("node01", cpu16), ("node02", cpu16)] + [(f"node0{i}", cpu8) for i in (3, 4, 5)]
        ),
        "CPU+GPU": platform_xml(
            [("node01", cpu16), ("node02", cpu16)] + [(f"node0{i}", gpu8) for i in (3, 4, 5)]
        ),
    }


def workload(rate_per_10min: float, count: int, seed: int, on_gpu: float, on_cpu: float) -> dict:
    w = mixed(
        count,
        rate_per_10min / 600.0,
        seed=seed,
        gpu_fraction=1.0,
        gpu_image_durations=(on_gpu, on_cpu),
        cpu="4",
        memory="1Gi",
        scheduler=SCHEDULER_NAME,
    )
    for profile in w["profiles"].values():
        profile["image"] = IMAGE
        profile["annotations"] = {"kubcg.timewarp.io/gpu-image": "registry.example/app:cuda"}
    return w


def seeded_history(path: Path, on_gpu: float, on_cpu: float) -> None:
    history = History()
    for node in ("node01", "node02", "node03", "node04", "node05"):
        history.record(IMAGE, node, "cpu", "cpu", on_cpu)
    for node in ("node03", "node04", "node05"):
        history.record(IMAGE, node, "gpu", "gpu", on_gpu)
    history.save(path)


def run(cmd: str, platform: Path, wl: Path, out: Path) -> list[dict]:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "timewarp",
            "simulate",
            "--scheduler",
            cmd,
            "-p",
            str(platform),
            "-w",
            str(wl),
            "-o",
            str(out),
            "-q",
            "--no-plots",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise SystemExit(f"simulate failed ({cmd}):\n{r.stderr[-2000:]}")
    manifest = json.loads((out / "manifest.json").read_text())["figures"]
    if manifest["rejected_by_kubelet"] or manifest["nondeterministic_advances"]:
        print(f"  warning: {out}: {manifest}", file=sys.stderr)
    with open(out / "out_jobs.csv", newline="") as f:
        return list(csv.DictReader(f))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[3, 5, 10, 20, 50])
    parser.add_argument("--count", type=int, default=30, help="pods per run (30)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--gpu-on-gpu", type=float, default=100.0)
    parser.add_argument("--gpu-on-cpu", type=float, default=300.0)
    parser.add_argument("-o", "--output", type=Path, default=None)
    args = parser.parse_args()
    out_root = args.output or Path(tempfile.mkdtemp(prefix="kubcg_poisson_"))
    out_root.mkdir(parents=True, exist_ok=True)
    plats = {}
    for name, xml in platforms().items():
        plats[name] = out_root / f"platform_{name.replace('+', '_')}.xml"
        plats[name].write_text(xml)
    print(f"outputs in {out_root}")
    print(
        "| λ / 10 min | platform | default_like: mean turnaround (min–max) | kubcg | kubcg gain |"
    )
    print("| --- | --- | --- | --- | --- |")
    for rate in args.rates:
        for pname, ppath in plats.items():
            results: dict[str, list[float]] = {"default_like": [], "kubcg": []}
            for seed in args.seeds:
                tag = f"l{rate:g}_{pname.replace('+', '_')}_s{seed}"
                wl = out_root / f"workload_{tag}.json"
                wl.write_text(
                    json.dumps(workload(rate, args.count, seed, args.gpu_on_gpu, args.gpu_on_cpu))
                )
                hist = out_root / f"history_{tag}.json"
                seeded_history(hist, args.gpu_on_gpu, args.gpu_on_cpu)
                cmds = {
                    "default_like": f"python -m sample_schedulers.default_like --scheduler-name {SCHEDULER_NAME}",
                    "kubcg": f"python -m sample_schedulers.kubcg --scheduler-name {SCHEDULER_NAME} --history {hist}",
                }
                for sched, cmd in cmds.items():
                    rows = run(cmd, ppath, wl, out_root / f"{sched}_{tag}")
                    ok = [r for r in rows if r["success"] == "1"]
                    if len(ok) != len(rows):
                        print(
                            f"  warning: {sched} {tag}: {len(rows) - len(ok)} jobs failed",
                            file=sys.stderr,
                        )
                    results[sched].append(statistics.mean(float(r["turnaround_time"]) for r in ok))
            d, k = results["default_like"], results["kubcg"]
            gain = 1 - statistics.mean(k) / statistics.mean(d)
            print(
                f"| {rate:g} | {pname} | {statistics.mean(d):.1f} s ({min(d):.1f}–{max(d):.1f})"
                f" | {statistics.mean(k):.1f} s ({min(k):.1f}–{max(k):.1f}) | {gain:+.0%} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
