"""``python -m sample_schedulers.default_like --scheduler-name NAME``"""

from __future__ import annotations

import argparse
import sys

from sample_schedulers.common.cli import add_common_arguments, main
from sample_schedulers.default_like.scoring import decide


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sample_schedulers.default_like",
        description="A kube-scheduler look-alike: filter, LeastAllocated + "
        "BalancedAllocation, exponential backoff.",
    )
    add_common_arguments(parser)
    return parser


if __name__ == "__main__":
    sys.exit(main(build_parser(), lambda args: decide, "default_like"))
