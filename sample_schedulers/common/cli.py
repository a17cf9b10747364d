"""Command-line options every sample scheduler takes, and the common ``main`` skeleton."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable
from types import FrameType

from kubernetes import client, config

from .kube import load_config
from .loop import Decide, WatchScheduler


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scheduler-name",
        default="default-scheduler",
        help="schedule pods whose spec.schedulerName is this (default: %(default)s; "
        "Batkube's workloads use 'default')",
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)"
    )
    parser.add_argument(
        "--initial-backoff",
        type=positive_float,
        default=1.0,
        metavar="SECONDS",
        help="first retry delay of an unschedulable pod (default: %(default)s)",
    )
    parser.add_argument(
        "--max-backoff",
        type=positive_float,
        default=10.0,
        metavar="SECONDS",
        help="retry delay cap (default: %(default)s)",
    )
    parser.add_argument(
        "--max-unschedulable",
        type=positive_float,
        default=300.0,
        metavar="SECONDS",
        help="retry a waiting pod after this long even without a cluster change "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="(default: %(default)s)",
    )


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(
    parser: argparse.ArgumentParser,
    make_decide: Callable[[argparse.Namespace], Decide],
    logger_name: str,
    argv: list[str] | None = None,
) -> int:
    """Parse options, load the kube config, and schedule until interrupted.

    ``make_decide``'s function must fail exactly when ``feasible_nodes`` finds no node
    (the loop's ``fail_fast`` shortcut relies on it).

    ``make_decide`` may raise ValueError for bad scheduler-specific options: it is
    reported as a usage error (exit 2) before anything connects.

    Returns 1 when no cluster configuration works. Once scheduling, it never returns: on
    SIGTERM/Ctrl-C it ends the process with status 0, on an unexpected error with 1
    (after logging it), through ``os._exit`` (see the comment there).
    """
    args = parser.parse_args(argv)
    if args.max_backoff < args.initial_backoff:
        parser.error("--max-backoff must be >= --initial-backoff")
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    log = logging.getLogger(logger_name)
    try:
        decide = make_decide(args)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        source = load_config(args.kubeconfig)
    except config.ConfigException as exc:
        print(f"{parser.prog}: cannot reach a cluster: {exc}", file=sys.stderr)
        return 1
    log.info("using %s configuration", source)
    scheduler = WatchScheduler(
        client.CoreV1Api(),
        decide,
        scheduler_name=args.scheduler_name,
        initial_backoff=args.initial_backoff,
        max_backoff=args.max_backoff,
        max_unschedulable=args.max_unschedulable,
        logger=log,
        fail_fast=True,
    )
    signal.signal(signal.SIGTERM, _terminate)
    code = 0
    try:
        scheduler.run()
    except (KeyboardInterrupt, SystemExit):
        pass
    except Exception:
        log.exception("scheduler failed")
        code = 1
    finally:
        scheduler.stop()
        log.info("stopped after binding %d pod(s)", scheduler.bound)
        # The watch threads are daemons, possibly inside the client's compiled (Rust)
        # model validation; a daemon thread torn down there during interpreter
        # finalization aborts the process (SIGABRT). Nothing is left to clean up, so
        # flush and leave without finalizing.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
