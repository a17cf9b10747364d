"""``python -m sample_schedulers.kse_rebalancer --scheduler-name NAME``: run the rebalancer.

The main thread binds pending pods of NAME (replacements to their planned node, new pods
by ``--placement``); an APScheduler ``BackgroundScheduler`` runs a rebalancing round
every ``--interval`` seconds. Loads ``~/.kube/config`` (or ``$KUBECONFIG``), falling back
to the in-cluster service account. Exit status 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path

import kubernetes
from apscheduler.schedulers.background import BackgroundScheduler
from kubernetes import client, config

from sample_schedulers.common.kube import load_config

from .binder import Binder, TargetBook
from .imbalance import ImbalanceLog
from .rebalancer import Rebalancer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sample_schedulers.kse_rebalancer",
        description="KSE: periodic GreedyLB/RefineLB rebalancing of ReplicaSet pods.",
    )
    parser.add_argument(
        "--scheduler-name",
        default="default-scheduler",
        help="rebalance and bind pods whose spec.schedulerName is this (default-scheduler)",
    )
    parser.add_argument("--algorithm", choices=["greedy", "refine"], default="refine")
    parser.add_argument(
        "--metric", choices=["cpu", "memory"], default="cpu", help="load to balance (cpu)"
    )
    parser.add_argument(
        "--overload",
        type=float,
        default=1.0,
        help="RefineLB overload factor (>= 1.0): heavy above mean * factor (1.0)",
    )
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between rounds (60)")
    parser.add_argument(
        "--imbalance-csv",
        type=Path,
        default=Path("kse_imbalance.csv"),
        help="CSV of node imbalance per round (kse_imbalance.csv)",
    )
    parser.add_argument(
        "--placement",
        choices=["random", "least-requested"],
        default="random",
        help="where new pods of our schedulerName go (random, seeded, as in the paper)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random placement (0)")
    parser.add_argument(
        "--no-bind",
        action="store_true",
        help="only evict; leave binding (of new pods and replacements) to another scheduler",
    )
    parser.add_argument(
        "--once", action="store_true", help="run one round now, then exit (no binding loop)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.overload < 1.0:
        parser.error(f"--overload must be >= 1.0, got {args.overload}")
    if args.interval <= 0:
        parser.error(f"--interval must be > 0, got {args.interval}")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    try:
        imbalance = ImbalanceLog(args.imbalance_csv)
    except OSError as exc:
        print(f"kse_rebalancer: --imbalance-csv {args.imbalance_csv}: {exc}", file=sys.stderr)
        return 2
    try:
        load_config()
    except config.ConfigException as exc:
        print(f"kse_rebalancer: cannot reach a cluster: {exc}", file=sys.stderr)
        imbalance.close()
        return 2
    core = client.CoreV1Api()
    targets = TargetBook()
    rebalancer = Rebalancer(
        core,
        client.CustomObjectsApi(),
        args.scheduler_name,
        None if args.no_bind else targets,
        algorithm=args.algorithm,
        metric=args.metric,
        overload=args.overload,
        imbalance_log=imbalance,
    )
    if args.once:
        rebalancer.round()
        imbalance.close()
        return 0
    scheduler = BackgroundScheduler()
    scheduler.add_job(
        rebalancer.round, "interval", seconds=args.interval, max_instances=1, coalesce=True
    )
    scheduler.start()
    binder = None
    if not args.no_bind:
        binder = Binder(core, args.scheduler_name, targets, args.placement, args.seed)

    def on_sigterm(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    logging.getLogger("kse").info(
        "KSE %s on schedulerName=%s, every %gs, imbalance -> %s (kubernetes client %s)",
        args.algorithm,
        args.scheduler_name,
        args.interval,
        args.imbalance_csv,
        kubernetes.__version__,
    )
    try:
        if binder is not None:
            binder.run()
        else:
            while True:
                time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        if binder is not None:
            binder.stop()
        scheduler.shutdown(wait=False)
        imbalance.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
