"""``python -m sample_schedulers.default_like --scheduler-name NAME``"""

from __future__ import annotations

import argparse
import sys

from sample_schedulers.common.cli import add_common_arguments, main
from sample_schedulers.default_like.scoring import SampledDecide, decide


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sample_schedulers.default_like",
        description="A kube-scheduler look-alike: filter, LeastAllocated + "
        "BalancedAllocation, exponential backoff.",
    )
    add_common_arguments(parser)
    parser.add_argument(
        "--percentage-of-nodes-to-score",
        type=int,
        default=0,
        metavar="P",
        help="kube-scheduler's option: stop filtering once P%% of the nodes (at least 100) "
        "were found feasible, continuing round robin next time; 100 = filter and score "
        "every node. Default: 0, kube-scheduler's adaptive default (50%% minus 1%% per 125 "
        "nodes, at least 5%%; every node below 100 nodes)",
    )
    return parser


def make_decide(args: argparse.Namespace):
    if args.percentage_of_nodes_to_score == 100:
        return decide
    return SampledDecide(args.percentage_of_nodes_to_score)


if __name__ == "__main__":
    sys.exit(main(build_parser(), make_decide, "default_like"))
