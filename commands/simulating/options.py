"""The command-line options of ``timewarp simulate`` (and those ``timewarp broker`` shares)."""

from __future__ import annotations

import argparse
import re

from commands.run import add_time_arguments
from patcher.launch import DEFAULT_SEED

_DAYS = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)d(.*)$")


def sim_duration(text: str) -> float:
    """Simulated seconds: a number of seconds (``3600``) or a duration with units
    (``1h``, ``90m``, ``1h30m``, and days: ``3d``, ``1d12h`` — a run prints days, so
    it takes them; Go's durations, which Batkube's flags follow, have none)."""
    try:
        value = float(text)
    except ValueError:
        from broker.drivers.lockstep_params import parse_duration_ns

        days = _DAYS.match(text)
        try:
            value = float(days.group(1)) * 86400 if days else 0.0
            rest = days.group(2) if days else text
            value += parse_duration_ns(rest) / 1e9 if rest.strip() else 0.0
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected seconds (3600) or a duration like 3d, 1h, 90m or 1h30m, got {text!r}"
            ) from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a duration >= 0, got {text!r}")
    return value


# kube-controller-manager's default, as broker/controllers/terminated_gc.py's
# DEFAULT_THRESHOLD (not imported: the broker loads only once a run starts)
TERMINATED_POD_GC_THRESHOLD = 12_500


def _gc_threshold(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of pods >= 0, got {text!r}")
    return value


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a run that ``simulate`` and ``broker`` share: virtual time and
    rewriting, the mode, when to stop or warn, the schedulers' folder, plots, -q."""
    from broker.drivers.pacing import add_pacing_arguments
    from commands.modes import add_mode_arguments

    add_time_arguments(parser)
    parser.add_argument(
        "--mode",
        choices=("deterministic", "lockstep", "realtime"),
        default="deterministic",
        help="how simulated time moves (default deterministic; lockstep and realtime: see "
        "docs/broker.md)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile every scheduler process with cProfile: OUT/profile-<process>.prof "
        "(python -m pstats FILE); slower, same outputs",
    )
    parser.add_argument(
        "--until",
        "--max-sim-time",
        dest="until",
        type=sim_duration,
        default=None,
        metavar="T",
        help="stop the run at simulated time T (seconds, or 3d, 2h, 90m, ...); the outputs are "
        "then partial (the jobs that ended by T) and the exit status 0",
    )
    parser.add_argument(
        "--no-progress-after",
        type=sim_duration,
        default=600.0,
        metavar="T",
        help="report when pods wait and nothing was bound, started or ended for T of "
        "simulated time although a pod would fit (seconds, or 10m, 1h, ...; 0: never; "
        "default 10m)",
    )
    parser.add_argument(
        "--scheduler-exit",
        choices=("continue", "fail"),
        default="continue",
        help="a scheduler process that exits 0 before the simulation ends: that process is "
        "done and the run goes on (continue, the default: one-shot tools, --once modes), "
        "or the run fails (fail); any other exit fails the run",
    )
    parser.add_argument(
        "--on-no-progress",
        choices=("stop", "warn"),
        default="stop",
        help="once every job was submitted, a no-progress report stops the run with partial "
        "outputs and exit status 4 (stop, the default), or only warns (warn)",
    )
    parser.add_argument(
        "--terminated-pod-gc-threshold",
        type=_gc_threshold,
        default=TERMINATED_POD_GC_THRESHOLD,
        metavar="N",
        help="as kube-controller-manager's: once more than N pods have terminated "
        "(Succeeded or Failed), the oldest beyond N are deleted, every 20 s of simulated "
        f"time (0: never; default {TERMINATED_POD_GC_THRESHOLD:,}). The outputs do not "
        "change; the broker's memory stays flat in the number of pods that ended",
    )
    add_mode_arguments(parser)
    add_pacing_arguments(parser)
    parser.add_argument(
        "--no-import-hook",
        action="store_true",
        help="rewrite nothing on import: the schedulers were patched ahead of time "
        "(`timewarp patch`)",
    )
    parser.add_argument(
        "--cwd",
        metavar="DIR",
        help="working directory of the scheduler processes (default: the current one)",
    )
    parser.add_argument(
        "--no-plots",
        action="store_true",
        help="skip gantt.png and utilisation.png (drawing them takes about a second or two)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only warnings and errors: no progress bar, no summary of a run that "
        "went well (a failed or partial run still prints its summary)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scheduler",
        action="append",
        required=True,
        metavar="CMD",
        help="a scheduler's ordinary command line, run with its own KUBECONFIG (repeatable: "
        "several schedulers at once)",
    )
    parser.add_argument("-p", "--platform", required=True, help="SimGrid platform XML file")
    parser.add_argument(
        "-w",
        "--workload",
        action="append",
        required=True,
        help="Batsim workload JSON file (repeatable: w0, w1, ... in order)",
    )
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="output directory, made if missing (an earlier run's CSVs there are replaced)",
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--batsim",
        metavar="PATH",
        help="use the real Batsim program at PATH instead of the embedded simulator",
    )
    parser.add_argument(
        "--write-kubeconfig",
        metavar="PATH",
        help="also write the people's kubeconfig at PATH (HTTPS, read-only observer: "
        "kubectl); a scheduler that loads it from that path acts as itself",
    )
    parser.add_argument(
        "--pause-at",
        action="append",
        type=sim_duration,
        default=[],
        metavar="T",
        help="pause at simulated time T (repeatable): the cluster holds still and the API "
        "answers (kubectl) until Enter or `timewarp resume OUT`; deterministic mode only",
    )
    parser.add_argument(
        "--pause-on",
        action="append",
        default=[],
        metavar="COND",
        help="pause the first time COND holds (repeatable): refused (the kubelet refused a "
        "pod), pending>D (a pod pending longer than D, e.g. pending>10m), failed-rate>X (a "
        "service's failed share of requests above X); SIGUSR1 pauses at the next instant",
    )
    parser.add_argument(
        "--check-determinism",
        action="store_true",
        help="run the simulation twice and compare every output and every process's log "
        "byte for byte, naming the first line that differs (exit 3 when they do)",
    )
    parser.add_argument(
        "--incluster",
        action="store_true",
        help="serve HTTPS and give the schedulers in-cluster configuration (load_incluster_config)",
    )


def run_seed(args: argparse.Namespace) -> int:
    """The run's seed: ``--seed``, or the fixed default (runs are reproducible unless
    told otherwise)."""
    return DEFAULT_SEED if args.seed is None else args.seed
