"""What a run needs, checked before anything starts: a refusal exits 2 with a message naming
what and where, and leaves nothing behind."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from commands.outfiles import (
    OutputDirError,
    check_output_dir,
)

if TYPE_CHECKING:
    from simulator.platform import Platform
    from simulator.traffic.spec import ServiceSpec
    from simulator.workload import Workload
from commands.simulating.options import sim_duration


class Refused(Exception):
    """A check before anything starts failed; the text says what and where."""


def read_inputs(args: argparse.Namespace) -> tuple[Platform, list[Workload]]:
    """The platform and the workloads, parsed, and checked for what Kubernetes needs
    (node and pod shapes, pods that could never run)."""
    from simulator.mixups import input_mixup
    from simulator.platform import PlatformError, load_platform
    from simulator.workload import WorkloadError, load_workload

    mixup = input_mixup(args.platform, args.workload)
    if mixup:
        raise Refused(mixup)
    try:
        platform = load_platform(args.platform)
        workloads = [
            load_workload(w, f"w{i}", len(platform.compute)) for i, w in enumerate(args.workload)
        ]
    except FileNotFoundError as exc:
        raise Refused(f"no such file: {exc.filename}") from None
    except (PlatformError, WorkloadError) as exc:
        raise Refused(str(exc)) from None
    from broker.cluster.input_check import InputError, check_inputs

    try:  # the Kubernetes side: node and pod shapes, pods that could never run
        check_inputs(platform, workloads)
    except InputError as exc:
        raise Refused(str(exc)) from None
    return platform, workloads


def check_options(args: argparse.Namespace) -> None:
    """The mode's and the pacing's parameters, the scheduler commands, ``--batsim``."""
    from commands.modes import ModeArgumentError, check_mode_arguments

    try:
        check_mode_arguments(args)
    except ModeArgumentError as exc:
        raise Refused(str(exc)) from None
    from broker.drivers.pacing import PacingArgumentError, check_pacing_arguments

    try:
        check_pacing_arguments(args)
    except PacingArgumentError as exc:
        raise Refused(str(exc)) from None
    from patcher.launch import LaunchError, parse_launch

    for command in args.scheduler:
        try:
            if not parse_launch(shlex.split(command)).argv:
                raise Refused(f"--scheduler: empty command {command!r}")
        except (LaunchError, ValueError) as exc:  # ValueError: shlex's unbalanced quotes
            raise Refused(f"--scheduler {command!r}: {exc}") from None
    if args.batsim and shutil.which(args.batsim) is None:
        raise Refused(f"--batsim: program not found: {args.batsim!r}")
    _check_pauses(args)


def _check_pauses(args: argparse.Namespace) -> None:
    """``--pause-on`` conditions parsed (into ``args.pause_conditions``); pauses only
    where simulated time waits for them (deterministic mode)."""
    from commands.pausing import parse_condition

    conditions = []
    for text in getattr(args, "pause_on", None) or []:
        try:
            conditions.append(parse_condition(text, sim_duration))
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise Refused(f"--pause-on {text!r}: {exc}") from None
    args.pause_conditions = conditions
    if (conditions or getattr(args, "pause_at", None)) and args.mode != "deterministic":
        raise Refused(
            f"--pause-at/--pause-on need --mode deterministic: in {args.mode} mode simulated "
            "time follows the wall clock and would not hold still"
        )


def check_platform_for_batsim(args: argparse.Namespace, platform: Platform) -> None:
    """What real Batsim would abort on: refused with ``--batsim``, a note without."""
    from simulator.platform import real_batsim_refusals

    refused = real_batsim_refusals(platform)
    if refused and args.batsim:
        raise Refused(
            "real Batsim would abort on this platform:\n  " + "\n  ".join(refused) + "\n"
            "fix these lines (a <config> key can go: SMPI's settings are not used by "
            "Batsim's jobs), or run without --batsim (the embedded simulator accepts them)"
        )
    for line in refused:
        print(
            f"timewarp simulate: note: {line}; the embedded simulator accepts it (fix it to "
            "run this platform with --batsim)",
            file=sys.stderr,
        )


def check_paths(args: argparse.Namespace) -> None:
    if args.cwd and not Path(args.cwd).is_dir():
        raise Refused(f"--cwd {args.cwd}: not a directory")
    if args.write_kubeconfig:
        try:
            check_output_dir(Path(args.write_kubeconfig).parent, "--write-kubeconfig")
        except OutputDirError as exc:
            raise Refused(str(exc)) from None


def declared_objects(workloads: list[Workload]) -> list[tuple[str, dict]]:
    """The CRDs and custom resources the workloads declare, as the API would take them
    (``broker/cluster/declared.py``)."""
    from broker.cluster.declared import DeclaredError, check_declared
    from simulator.workload import WorkloadError, read_declared_objects

    try:
        declared = [d for w in workloads for d in read_declared_objects(w.path)]
        check_declared(declared)
    except (WorkloadError, DeclaredError) as exc:
        raise Refused(str(exc)) from None
    return declared


def services_of(workloads: list[Workload]) -> list[ServiceSpec]:
    """The workloads' services (docs/services.md); a name is declared once."""
    from simulator.traffic.spec import declared_twice

    services = [s for w in workloads for s in w.services]
    duplicate = declared_twice(services)
    if duplicate is not None:
        raise Refused(f"service {duplicate!r} is declared in more than one workload file")
    return services


def check_output(out: Path) -> None:
    try:
        check_output_dir(out)
    except OutputDirError as exc:
        raise Refused(str(exc)) from None


def master_flags(platform) -> list[str]:  # type: ignore[no-untyped-def]
    """Real Batsim's ``-m`` for this platform. A master found by its name is named. A
    master marked ``role=master`` gets the role from the prop, and Batsim's default ``-m
    master_host`` would give it a second time to a host of that name (Batsim 4.2.1 aborts:
    "Cannot create any role from string description 'master,master'"): ``-m`` then names
    no host of the platform."""
    if platform.master.role != "master":
        return ["-m", platform.master.name]
    names = {h.name for h in (platform.master, *platform.compute, *platform.storage)}
    unused = "timewarp-role-master"
    while unused in names:
        unused += "_"
    return ["-m", unused]
