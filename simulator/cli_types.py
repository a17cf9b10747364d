"""argparse types shared by ``timewarp workload``'s tools: each refuses a bad value with
a message saying what was expected."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def number(kind: type, check: Callable[[Any], bool], what: str) -> Callable[[str], Any]:
    """An argparse type: ``kind(text)`` that ``check`` accepts, else "expected WHAT"."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not check(value):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
        return value

    return parse


positive_int = number(int, lambda v: v >= 1, "an integer >= 1")
non_negative = number(float, lambda v: v >= 0, "a number >= 0")
positive = number(float, lambda v: v > 0, "a number > 0")
fraction = number(float, lambda v: 0 < v <= 1, "a number within (0, 1]")
share = number(float, lambda v: 0 <= v <= 1, "a number within [0, 1]")


def window(text: str) -> tuple[float, float]:
    start, sep, end = text.partition(":")
    try:
        window = (float(start) if start else 0.0, float(end) if end else float("inf"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:END in seconds, got {text!r}") from None
    if not sep or window[0] >= window[1]:
        raise argparse.ArgumentTypeError(f"expected START:END with START < END, got {text!r}")
    return window
