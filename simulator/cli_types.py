"""argparse types shared by ``timewarp workload``'s tools: each refuses a bad value with
a message saying what was expected."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


def window(text: str) -> tuple[float, float]:
    start, sep, end = text.partition(":")
    try:
        window = (float(start) if start else 0.0, float(end) if end else float("inf"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:END in seconds, got {text!r}") from None
    if not sep or window[0] >= window[1]:
        raise argparse.ArgumentTypeError(f"expected START:END with START < END, got {text!r}")
    return window


def fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number within (0, 1], got {text}")
    return value
