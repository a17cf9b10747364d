"""``python -m sample_schedulers.kubcg --scheduler-name NAME``: run KubCG against a cluster.

Loads ``~/.kube/config`` (or ``$KUBECONFIG``), falling back to the in-cluster service
account. Exit status 2 on bad arguments or an unreadable history file.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

import kubernetes
from kubernetes import client, config

from sample_schedulers.common.kube import load_config

from .history import History
from .scheduler import KubcgScheduler
from .switch import parse_image_table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sample_schedulers.kubcg",
        description="KubCG: history-based CPU/GPU placement for Kubernetes pods.",
    )
    parser.add_argument(
        "--scheduler-name",
        default="default-scheduler",
        help="schedule pods whose spec.schedulerName is this (default: default-scheduler)",
    )
    parser.add_argument(
        "--history",
        type=Path,
        help="JSON file of learned durations: loaded at start, rewritten after each completion",
    )
    parser.add_argument(
        "--gpu-image",
        action="append",
        default=[],
        metavar="CPU_IMAGE=GPU_IMAGE",
        help="the switch table: IMAGE can also run on a GPU as GPU_IMAGE (repeatable)",
    )
    parser.add_argument(
        "--prior-duration",
        type=float,
        default=60.0,
        help="seconds assumed for an image never seen, when estimating running pods (60)",
    )
    parser.add_argument(
        "--correct-interval",
        type=float,
        default=30.0,
        help="seconds between estimator-corrector passes while pods wait for a GPU (30)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.prior_duration <= 0 or args.correct_interval <= 0:
        parser.error("--prior-duration and --correct-interval must be > 0")
    try:
        table = parse_image_table(args.gpu_image)
        history = History.load(args.history) if args.history else History()
    except (ValueError, OSError) as exc:
        print(f"kubcg: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        load_config()
    except config.ConfigException as exc:
        print(f"kubcg: cannot reach a cluster: {exc}", file=sys.stderr)
        return 2
    scheduler = KubcgScheduler(
        client.CoreV1Api(),
        args.scheduler_name,
        history=history,
        history_path=args.history,
        image_table=table,
        prior_duration=args.prior_duration,
        correct_interval=args.correct_interval,
    )

    def on_sigterm(*_: object) -> None:
        scheduler.stop()
        raise KeyboardInterrupt  # leave a blocking watch read at once

    signal.signal(signal.SIGTERM, on_sigterm)
    logging.getLogger("kubcg").info(
        "KubCG serving schedulerName=%s (%d runs in history; kubernetes client %s)",
        args.scheduler_name,
        len(history),
        kubernetes.__version__,
    )
    try:
        scheduler.run()
    except KeyboardInterrupt:
        scheduler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
