"""``python -m sample_schedulers.kcss --scheduler-name NAME [--config FILE]
[--weight CRITERION=W ...] [--direction CRITERION=benefit|cost ...]``"""

from __future__ import annotations

import argparse
import functools
import logging
import sys

from sample_schedulers.common.cli import add_common_arguments, main
from sample_schedulers.kcss.criteria import CRITERIA, build_config
from sample_schedulers.kcss.decide import decide


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sample_schedulers.kcss",
        description="KCSS (Menouer & Darmon): TOPSIS over image transfer time, free cpu, "
        "free memory, free disk, power and running containers.",
    )
    add_common_arguments(parser)
    parser.add_argument("--config", metavar="FILE", help="YAML/JSON weights, directions, ...")
    parser.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="CRITERION=W",
        help=f"relative weight of a criterion ({', '.join(CRITERIA)}); default all equal",
    )
    parser.add_argument(
        "--direction",
        action="append",
        default=[],
        metavar="CRITERION=benefit|cost",
        help="whether more is better (benefit) or worse (cost)",
    )
    return parser


def make_decide(args: argparse.Namespace):
    config = build_config(args.config, args.weight, args.direction)
    logging.getLogger("kcss").info("criteria: %s", config.describe())
    return functools.partial(decide, config=config)


if __name__ == "__main__":
    sys.exit(main(build_parser(), make_decide, "kcss"))
