"""Wall time of an asyncio scheduler (kubernetes_asyncio, aiohttp) against the threaded
``default_like`` on the same input: Batkube's burst (200 pods at once on 16 nodes).

    .venv/bin/python benchmarks/asyncio_binder.py --runs 5

Each run is one ``timewarp simulate -q --no-plots`` process, timed from spawn to exit;
``internal`` is the manifest's wall time (without interpreter start-up). Runs of the two
schedulers alternate, so both see the same machine load; the load average is printed
before and after. Both must give the same bytes run after run (checked). The asyncio
binder is ``tests/programs/aio_binder.py``: watches plus a local cache, like
``default_like``, but on kubernetes_asyncio — whose import and model decoding cost more
than the official client's (reported as the scheduler's CPU).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments._common import (  # noqa: E402
    BATKUBE,
    DEFAULT_LIKE,
    Summary,
    jobs_figures,
    load_average,
    print_table,
    run_simulate,
)

PLATFORM = BATKUBE / "platforms/platform_graphene_16nodes.xml"
WORKLOAD = BATKUBE / "workloads/200_delay170.json"
SCHEDULERS = {
    "default_like (threads, official client)": DEFAULT_LIKE,
    "aio_binder (asyncio, kubernetes_asyncio)": "python tests/programs/aio_binder.py",
}
HEADERS = [
    "scheduler",
    "runs",
    "wall min/med/max (s)",
    "internal med (s)",
    "CPU scheduler med (s)",
    "CPU total med (s)",
    "makespan (s)",
    "identical",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"load average before: {load_average()}", file=sys.stderr)
    runs: dict[str, list] = {name: [] for name in SCHEDULERS}
    with tempfile.TemporaryDirectory(prefix="bench-asyncio-") as tmp:
        for n in range(args.runs):
            for i, (name, command) in enumerate(SCHEDULERS.items()):
                out = Path(tmp) / f"{i}-{n}"
                runs[name].append(run_simulate([command], PLATFORM, [WORKLOAD], out))
        table = []
        for name, done in runs.items():
            good = [r for r in done if r.ok]
            wall = Summary.of(r.wall_s for r in good)
            internal = Summary.of(r.manifest.get("wall_s", float("nan")) for r in good)
            # the scheduler process: "scheduler" for python -m sample_schedulers..., "other"
            # for a script run through patcher.run_script
            sched = Summary.of(
                r.cpu_s.get("scheduler", 0.0) + r.cpu_s.get("other", 0.0) for r in good
            )
            total = Summary.of(r.cpu_total_s for r in good)
            same = len({(r.out / "out_jobs.csv").read_bytes() for r in good}) == 1
            makespan = jobs_figures(good[0].out / "out_jobs.csv")[0] if good else float("nan")
            table.append([name, f"{len(good)}/{len(done)}", wall.spread(2),
                          f"{internal.median:.2f}", f"{sched.median:.2f}",
                          f"{total.median:.2f}", f"{makespan:.1f}", "yes" if same else "NO"])  # fmt: skip
    print_table(HEADERS, table)
    print(f"load average after: {load_average()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
