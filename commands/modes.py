"""Command-line flags of the lockstep and realtime modes (``timewarp simulate``), and the
factory that builds the broker for ``--mode``.

Durations take units, Go style as in Batkube (``20ms``, ``5s``, ``1m30s``). Flags of a
mode other than the chosen one are refused rather than silently ignored.
"""

from __future__ import annotations

import argparse
from typing import Any

# flag -> (dest, default) for lockstep's durations, Batkube's names and defaults
_LOCKSTEP_DURATIONS = {
    "--timeout-value": ("timeout_value", "20ms"),
    "--min-delay": ("min_delay", "0ms"),
    "--base-simulation-timestep": ("base_simulation_timestep", "100ms"),
    "--max-simulation-timestep": ("max_simulation_timestep", "20s"),
    "--scheduler-crash-timeout": ("scheduler_crash_timeout", "5s"),
}
_LOCKSTEP_FLAGS = {
    **{dest: flag for flag, (dest, _) in _LOCKSTEP_DURATIONS.items()},
    "backoff_multiplier": "--backoff-multiplier",
    "fast_forward_on_no_pending_jobs": "--fast-forward-on-no-pending-jobs",
    "detect_scheduler_deadlock": "--detect-scheduler-deadlock",
}
_REALTIME_FLAGS = {"speed": "--speed", "realtime_step": "--realtime-step"}


class ModeArgumentError(ValueError):
    pass


def add_mode_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("lockstep mode (Batkube's parameters)")
    helps = {
        "--timeout-value": "longest wall time a window waits for a decision (default 20ms)",
        "--min-delay": "shortest wall time a window lasts, even after a decision (default 0ms)",
        "--base-simulation-timestep": "first and reset value of the timestep (default 100ms)",
        "--max-simulation-timestep": "cap of the backed-off timestep (default 20s)",
        "--scheduler-crash-timeout": "wall time without a needed decision that counts as a "
        "deadlock (default 5s)",
    }
    for flag, (dest, _default) in _LOCKSTEP_DURATIONS.items():
        group.add_argument(flag, dest=dest, default=None, metavar="DURATION", help=helps[flag])
    group.add_argument(
        "--backoff-multiplier",
        default=None,
        metavar="X",
        help="timestep factor after a window without decision (default 2)",
    )
    group.add_argument(
        "--fast-forward-on-no-pending-jobs",
        action="store_true",
        default=None,
        help="no timestep call-back while no job is pending",
    )
    group.add_argument(
        "--detect-scheduler-deadlock",
        action="store_true",
        default=None,
        help="fail when jobs wait, none runs, and no decision comes for the crash timeout",
    )
    rt = parser.add_argument_group("realtime mode")
    rt.add_argument(
        "--speed",
        default=None,
        metavar="X",
        help="virtual seconds per wall second (default 1)",
    )
    rt.add_argument(
        "--realtime-step",
        default=None,
        metavar="DURATION",
        help="wall time between exchanges with the simulator (default 5ms)",
    )


def _given(args: argparse.Namespace, flags: dict[str, str]) -> list[str]:
    return [flag for dest, flag in flags.items() if getattr(args, dest, None) is not None]


def _duration(flag: str, text: str) -> int:
    from broker.drivers.lockstep_params import parse_duration_ns

    try:
        return parse_duration_ns(text)
    except ValueError as exc:
        raise ModeArgumentError(f"{flag}: {exc}") from None


def _number(flag: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ModeArgumentError(f"{flag}: expected a number, got {text!r}") from None


def check_mode_arguments(args: argparse.Namespace) -> None:
    """Validate and convert the mode flags in place (``args.lockstep``, ``args.speed``,
    ``args.realtime_step_ns``); raise ModeArgumentError naming the flag."""
    mode = args.mode
    stray = []
    if mode != "lockstep":
        stray += _given(args, _LOCKSTEP_FLAGS)
    if mode != "realtime":
        stray += _given(args, _REALTIME_FLAGS)
    if stray:
        raise ModeArgumentError(
            f"{', '.join(stray)} only apply with another --mode (this run is --mode {mode})"
        )
    args.lockstep = None
    if mode == "lockstep":
        # imported here: the dataclass machinery is ~7 ms that a deterministic run would
        # pay before its schedulers start
        from broker.drivers.lockstep_params import LockstepParams

        values: dict[str, Any] = {}
        for flag, (dest, default) in _LOCKSTEP_DURATIONS.items():
            text = getattr(args, dest)
            values[dest] = _duration(flag, default if text is None else text)
        multiplier = (
            2.0
            if args.backoff_multiplier is None
            else _number("--backoff-multiplier", args.backoff_multiplier)
        )
        try:
            args.lockstep = LockstepParams(
                timeout_ns=values["timeout_value"],
                min_delay_ns=values["min_delay"],
                base_timestep_ns=values["base_simulation_timestep"],
                max_timestep_ns=values["max_simulation_timestep"],
                backoff_multiplier=multiplier,
                fast_forward_on_no_pending_jobs=bool(args.fast_forward_on_no_pending_jobs),
                detect_scheduler_deadlock=bool(args.detect_scheduler_deadlock),
                scheduler_crash_timeout_ns=values["scheduler_crash_timeout"],
            )
        except ValueError as exc:
            raise ModeArgumentError(str(exc)) from None
    if mode == "realtime":
        speed = 1.0 if args.speed is None else _number("--speed", args.speed)
        if not (0 < speed < float("inf")):
            raise ModeArgumentError(f"--speed must be a positive number, got {args.speed!r}")
        args.speed = speed
        step = _duration("--realtime-step", args.realtime_step or "5ms")
        if step <= 0:
            raise ModeArgumentError("--realtime-step must be positive")
        args.realtime_step_ns = step


def mode_parameters(args: argparse.Namespace) -> dict[str, Any]:
    """The mode's effective parameters, for the manifest."""
    if getattr(args, "lockstep", None) is not None:
        return dict(vars(args.lockstep))
    if args.mode == "realtime":
        return {"speed": args.speed, "step_ns": args.realtime_step_ns}
    return {}


def make_broker(args: argparse.Namespace, *, rt_clock=None, **kwargs):  # type: ignore[no-untyped-def]
    """The broker for ``args.mode``; ``kwargs`` go to :class:`broker.drivers.engine.Broker`."""
    if args.mode == "lockstep":
        from broker.drivers.lockstep import LockstepBroker

        return LockstepBroker(params=args.lockstep, **kwargs)
    if args.mode == "realtime":
        from broker.drivers.realtime import RealtimeBroker

        return RealtimeBroker(rt_clock=rt_clock, step_ns=args.realtime_step_ns, **kwargs)
    from broker.drivers.engine import Broker

    return Broker(**kwargs)
