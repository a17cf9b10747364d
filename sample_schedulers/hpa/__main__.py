"""``python -m sample_schedulers.hpa`` — the HPA controller's loop: every
``--sync-period`` seconds (15, kube-controller-manager's default) reconcile every
HorizontalPodAutoscaler, then ``time.sleep``."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time

from kubernetes import client

from sample_schedulers.common.cli import positive_float
from sample_schedulers.common.kube import load_config
from sample_schedulers.hpa.controller import HpaController


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sample_schedulers.hpa",
        description="The Horizontal Pod Autoscaler (autoscaling/v2) as kube-controller-manager "
        "runs it: metrics.k8s.io and custom.metrics.k8s.io in, scale subresource and HPA "
        "status out.",
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)"
    )
    parser.add_argument(
        "--sync-period",
        type=positive_float,
        default=15.0,
        metavar="SECONDS",
        help="--horizontal-pod-autoscaler-sync-period (default: %(default)s)",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        source = load_config(args.kubeconfig)
    except Exception as exc:  # ConfigException and friends: say why and stop
        print(f"hpa: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("hpa").info(
        "using %s configuration; sync every %gs", source, args.sync_period
    )
    controller = HpaController(client.ApiClient())
    try:
        while True:
            controller.sync_all()
            time.sleep(args.sync_period)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
