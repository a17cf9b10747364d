"""``timewarp simulate``: the simulator, the broker and the scheduler(s) in one command.

    timewarp simulate --scheduler 'python -m sample_schedulers.default_like --scheduler-name default' \\
        -p examples/inputs/cluster16.xml -w examples/inputs/burst_40_delay170.json -o out/

Each ``--scheduler`` is an ordinary command line, run under ``timewarp run`` (its own
modules and the ``--patch-module`` packages are rewritten on import) with its own token
and ``KUBECONFIG``. Outputs in ``-o``: Batsim's CSVs (``out_jobs.csv``,
``out_schedule.csv``, ``out_machine_states.csv``), ``manifest.json`` (versions,
arguments, input hashes, figures), ``gantt.png`` and ``utilisation.png``, and one log per
process. Ctrl-C or any failure stops everything, keeps what was written, and exits
non-zero with the reason (1; 128 + the signal when stopped by one, whatever further
signals come during the clean-up: see :mod:`commands.stopping`); the embedded simulator
then writes *partial* CSVs (the jobs that ended so far), marked ``"outputs": "partial"``
in manifest.json and in the summary (outputs of an earlier run in the same directory are
removed first, so what is there is this run's). ``--until T`` ends a run at simulated
time T the same way, by request (exit 0); :mod:`commands.guards` warns when pods wait
and nothing binds them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time as _wall
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from commands.outfiles import (
    OutputDirError,
    check_output_dir,
    write_text_atomically,
)
from commands.run import add_time_arguments
from commands.services_report import SERVICES_CSV, plot_services, write_rows
from commands.stopping import Interrupted, StopSignals
from commands.threadname import name_os_thread
from patcher.launch import DEFAULT_SEED
from timewarp import __version__

if TYPE_CHECKING:
    from simulator.platform import Platform
    from simulator.traffic.spec import ServiceSpec
    from simulator.workload import Workload

OUT_PREFIX = "out"
SIGTERM_GRACE_S = 20.0  # time a stopped simulator gets to write partial outputs
OUT_FILES = tuple(f"{OUT_PREFIX}_{kind}.csv" for kind in ("jobs", "schedule", "machine_states"))
DECISIONS_CSV = f"{OUT_PREFIX}_decisions.csv"  # broker/cluster/decisions.py
RUNNING_CSV = f"{OUT_PREFIX}_running.csv"  # a partial run's jobs still running at the stop
PLOT_FILES = ("gantt.png", "utilisation.png")


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
        help="also write the (first) scheduler's kubeconfig at PATH",
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


def _fail(message: str, code: int = 2) -> int:
    print(f"timewarp simulate: {message}", file=sys.stderr)
    return code


def _sha256(path: Path) -> str:
    import hashlib  # not before the schedulers start: manifest facts are gathered later

    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Refused(Exception):
    """A check before anything starts failed; the text says what and where."""


def run(args: argparse.Namespace) -> int:
    """Check everything a run needs before anything starts (the inputs, the options, the
    paths), then run it: a refusal exits 2 with a message and leaves nothing behind."""
    out = Path(args.output)
    try:
        platform, workloads = _read_inputs(args)
        _check_options(args)
        _check_platform_for_batsim(args, platform)
        _check_paths(args)
        services = _services(workloads)
        declared = _declared(workloads)
        _check_output(out)
    except _Refused as exc:
        return _fail(str(exc))
    total_jobs = sum(len(w.jobs) for w in workloads)
    node_names = [host.name for host in platform.compute]

    def run_into(folder: Path) -> int:
        simulation = _Simulation(args, folder, total_jobs, node_names, services, declared)
        simulation.master_flags = _master_flags(platform)
        return simulation.run()

    if getattr(args, "check_determinism", False):
        from commands.determinism_check import run_twice

        return run_twice(out, run_into, sys.stderr, "timewarp simulate")
    return run_into(out)


def _read_inputs(args: argparse.Namespace) -> tuple[Platform, list[Workload]]:
    """The platform and the workloads, parsed, and checked for what Kubernetes needs
    (node and pod shapes, pods that could never run)."""
    from simulator.mixups import input_mixup
    from simulator.platform import PlatformError, load_platform
    from simulator.workload import WorkloadError, load_workload

    mixup = input_mixup(args.platform, args.workload)
    if mixup:
        raise _Refused(mixup)
    try:
        platform = load_platform(args.platform)
        workloads = [
            load_workload(w, f"w{i}", len(platform.compute)) for i, w in enumerate(args.workload)
        ]
    except FileNotFoundError as exc:
        raise _Refused(f"no such file: {exc.filename}") from None
    except (PlatformError, WorkloadError) as exc:
        raise _Refused(str(exc)) from None
    from broker.cluster.input_check import InputError, check_inputs

    try:  # the Kubernetes side: node and pod shapes, pods that could never run
        check_inputs(platform, workloads)
    except InputError as exc:
        raise _Refused(str(exc)) from None
    return platform, workloads


def _check_options(args: argparse.Namespace) -> None:
    """The mode's and the pacing's parameters, the scheduler commands, ``--batsim``."""
    from commands.modes import ModeArgumentError, check_mode_arguments

    try:
        check_mode_arguments(args)
    except ModeArgumentError as exc:
        raise _Refused(str(exc)) from None
    from broker.drivers.pacing import PacingArgumentError, check_pacing_arguments

    try:
        check_pacing_arguments(args)
    except PacingArgumentError as exc:
        raise _Refused(str(exc)) from None
    from patcher.launch import LaunchError, parse_launch

    for command in args.scheduler:
        try:
            if not parse_launch(shlex.split(command)).argv:
                raise _Refused(f"--scheduler: empty command {command!r}")
        except (LaunchError, ValueError) as exc:  # ValueError: shlex's unbalanced quotes
            raise _Refused(f"--scheduler {command!r}: {exc}") from None
    if args.batsim and shutil.which(args.batsim) is None:
        raise _Refused(f"--batsim: program not found: {args.batsim!r}")
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
            raise _Refused(f"--pause-on {text!r}: {exc}") from None
    args.pause_conditions = conditions
    if (conditions or getattr(args, "pause_at", None)) and args.mode != "deterministic":
        raise _Refused(
            f"--pause-at/--pause-on need --mode deterministic: in {args.mode} mode simulated "
            "time follows the wall clock and would not hold still"
        )


def _check_platform_for_batsim(args: argparse.Namespace, platform: Platform) -> None:
    """What real Batsim would abort on: refused with ``--batsim``, a note without."""
    from simulator.platform import real_batsim_refusals

    refused = real_batsim_refusals(platform)
    if refused and args.batsim:
        raise _Refused(
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


def _check_paths(args: argparse.Namespace) -> None:
    if args.cwd and not Path(args.cwd).is_dir():
        raise _Refused(f"--cwd {args.cwd}: not a directory")
    if args.write_kubeconfig:
        try:
            check_output_dir(Path(args.write_kubeconfig).parent, "--write-kubeconfig")
        except OutputDirError as exc:
            raise _Refused(str(exc)) from None


def _declared(workloads: list[Workload]) -> list[tuple[str, dict]]:
    """The CRDs and custom resources the workloads declare, as the API would take them
    (``broker/cluster/declared.py``)."""
    from broker.cluster.declared import DeclaredError, check_declared
    from simulator.workload import WorkloadError, read_declared_objects

    try:
        declared = [d for w in workloads for d in read_declared_objects(w.path)]
        check_declared(declared)
    except (WorkloadError, DeclaredError) as exc:
        raise _Refused(str(exc)) from None
    return declared


def _services(workloads: list[Workload]) -> list[ServiceSpec]:
    """The workloads' services (docs/services.md); a name is declared once."""
    from simulator.traffic.spec import declared_twice

    services = [s for w in workloads for s in w.services]
    duplicate = declared_twice(services)
    if duplicate is not None:
        raise _Refused(f"service {duplicate!r} is declared in more than one workload file")
    return services


def _check_output(out: Path) -> None:
    try:
        check_output_dir(out)
    except OutputDirError as exc:
        raise _Refused(str(exc)) from None


def _master_flags(platform) -> list[str]:  # type: ignore[no-untyped-def]
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


class _Wiring:
    """The parts of one run, made in :meth:`_Simulation._wire` and taken down in
    :meth:`_Simulation._take_down`: the clock service, the facade's endpoint (then the
    facade), the launcher, the broker."""

    def __init__(self) -> None:
        self.clock = None
        self.rt_clock = None  # realtime mode: the scaled wall clock
        self.endpoint = None
        self.facade = None
        self.launcher = None
        self.broker = None
        self.incluster_dir: Path | None = None


class _Simulation:
    """One ``timewarp simulate`` run, in the order a reader would name its steps:
    wire the parts (:meth:`_wire`), start the schedulers (:meth:`_start_schedulers`),
    start the facade, broker and simulator (:meth:`_start_broker`), let the broker drive
    the simulation to its end (:meth:`_drive`), take everything down
    (:meth:`_take_down`), judge the run (:meth:`_verdict`) and report it
    (:meth:`_report`)."""

    prog = "timewarp simulate"
    _parts: _Wiring | None = None

    def __init__(
        self,
        args: argparse.Namespace,
        out: Path,
        total_jobs: int,
        node_names: list[str],
        services: list | None = None,
        declared: list | None = None,
    ) -> None:
        self.args = args
        self.declared = declared or []  # the workloads' CRDs and custom resources
        self.out = out
        self.total_jobs = total_jobs
        self.node_names = node_names  # resource id -> host name (the plots' labels)
        self.pacer = None
        self.services = services or []  # the workloads' services with traffic
        self.sim_proc: subprocess.Popen | _EmbeddedSimulator | None = None

    def run(self) -> int:
        for name in (
            *OUT_FILES,
            *PLOT_FILES,
            SERVICES_CSV,
            RUNNING_CSV,
            DECISIONS_CSV,
        ):  # an earlier run's must not
            # pass for this one's
            (self.out / name).unlink(missing_ok=True)
        from broker.processes.launcher import SchedulerFailed
        from commands.guards import NO_PROGRESS_EXIT, NoProgressStop, StopAt

        started = self.started = _wall.perf_counter()
        parts = self._parts = _Wiring()
        result = None
        reason = ""
        stopped_at: StopAt | None = None
        no_progress: NoProgressStop | None = None
        with StopSignals(self.prog) as signals:
            try:
                self._wire(parts)
                self._start_schedulers(parts)
                progress = self._start_broker(parts)
                with progress:
                    result = parts.broker.run()
                    self.sim_wall = _wall.perf_counter() - started
                    progress.finish(result.virtual_s, self.sim_wall)
                reason = result.reason
            except SchedulerFailed as exc:
                reason = str(exc)
                self._scheduler_failed = True
            except Interrupted as exc:
                reason = f"interrupted by {signal.Signals(exc.signum).name}"
            except StopAt as exc:
                stopped_at = exc
                reason = str(exc)
            except NoProgressStop as exc:
                no_progress = exc
                reason = exc.report.splitlines()[0]
                self.stopped_at_s = exc.t_s
                self.stopped_by = "no progress"
            except OSError as exc:  # a full disk, a file that cannot be made: not a bug
                reason = f"cannot go on: {exc}"
                self.traceback = traceback.format_exc()
            except Exception as exc:  # a bug: end with a manifest and the traceback's gist
                reason = _internal_error(exc)
                self.traceback = traceback.format_exc()
            finally:
                signals.shield()  # from here on a signal is noted: the clean-up must end
                if result is None and parts.broker is not None:
                    result = _stopped_result(parts.broker, reason)
                sim_code = self._take_down(parts, result)
            wall = getattr(self, "sim_wall", None) or (_wall.perf_counter() - started)
            if stopped_at is not None:
                ok, reason = True, reason  # stopped where asked: a good, partial run
                self.stopped_at_s = stopped_at.t_s
            elif no_progress is not None:
                ok = False  # the report is the reason; the outputs are partial
            else:
                ok, reason = self._verdict(result, sim_code, reason)
            if signals.interrupted:
                ok, reason = (
                    False,
                    reason or "interrupted by " + signal.Signals(signals.received[0]).name,
                )
            kept = self._report(result, ok, reason, wall)
        if not ok:
            print(f"{self.prog}: FAILED: {reason}", file=sys.stderr)
        if signals.interrupted:
            return signals.exit_code or 130
        if not kept:
            return 1
        if no_progress is not None:
            return NO_PROGRESS_EXIT
        return 0 if ok else 1

    def _wire(self, parts: _Wiring) -> None:
        """The clock service, the facade's endpoint (bound now, so schedulers can start
        before the facade exists) and the launcher, into ``parts`` as each is made (so a
        signal half-way leaves nothing behind: :meth:`_take_down` closes what exists)."""
        from broker.clock.service import DEFAULT_EPOCH_NS, ClockService
        from broker.facade.endpoint import Endpoint
        from broker.processes.launcher import Launcher

        args = self.args
        epoch_ns = args.epoch if args.epoch is not None else DEFAULT_EPOCH_NS
        parts.clock = ClockService(
            mode=args.mode,
            epoch_ns=epoch_ns,
            stall_timeout=args.stall_timeout,
            on_stall=args.on_stall,
        )
        if args.mode == "realtime":
            from broker.drivers.realtime import ScaledWallClock

            parts.rt_clock = ScaledWallClock(args.speed, epoch_ns)
        parts.endpoint = Endpoint(tls=args.incluster)
        if args.incluster:
            parts.incluster_dir = Path(tempfile.mkdtemp(prefix="timewarp-sa-"))
        parts.launcher = Launcher(
            clock=parts.clock,
            facade=parts.endpoint,
            out_dir=self.out,
            patch_modules=args.patch_module,
            freeze_unpatched=args.freeze_unpatched,
            incluster_dir=parts.incluster_dir,
            extra_kubeconfig=Path(args.write_kubeconfig) if args.write_kubeconfig else None,
            virtual=args.mode != "realtime",
            import_hook=not args.no_import_hook,
            seed=run_seed(args),
            profile_dir=self.out if getattr(args, "profile", False) else None,
        )
        parts.launcher.zero_exit_continues = getattr(args, "scheduler_exit", "continue") == (
            "continue"
        )

    def _start_schedulers(self, parts: _Wiring) -> None:
        """Schedulers first: their start-up (importing a Kubernetes client) is the
        longest, and they need only the clock and the facade's endpoint. The manifest's
        slow facts (package metadata, input hashes) are gathered meanwhile."""
        for command in self.args.scheduler:
            parts.launcher.start(command, cwd=self.args.cwd)
        self._facts_thread = threading.Thread(
            target=self._gather_facts, name="manifest-facts", daemon=True
        )
        self._facts_thread.start()

    def _start_broker(self, parts: _Wiring) -> _ProgressView:
        """The facade on the endpoint, the broker (the Batsim decision process of the
        chosen mode) and the simulator that connects to it."""
        from broker.clock.service import FacadeClock
        from broker.facade import Facade
        from commands.modes import make_broker

        args = self.args
        facade_clock = parts.rt_clock if parts.rt_clock is not None else FacadeClock(parts.clock)
        parts.facade = Facade(
            facade_clock, endpoint=parts.endpoint, hold_until_cluster=True
        ).start()
        progress = _ProgressView(
            self.total_jobs, disabled=args.quiet, started=self.started, prog=self.prog
        )
        self._record_decisions(parts.facade)
        parts.broker = make_broker(
            args,
            endpoint=self._broker_endpoint(),
            clock=parts.clock,
            facade=parts.facade,
            launcher=parts.launcher,
            rt_clock=parts.rt_clock,
            services=self.services,
            declared=self.declared,
        )
        self._watch_progress(parts, progress)
        if args.mode == "deterministic":
            from broker.drivers.pacing import Pacer

            self.pacer = Pacer(
                parts.clock,
                api_latency_ns=args.api_latency_ns,
                poll_threshold=args.poll_threshold,
                poll_latency_ns=args.poll_latency_ns,
            ).attach(parts.facade)
            # the cluster changing is progress for the stall guard; API traffic is not
            parts.clock.stall.set_progress_probe(parts.facade.revision)
        self.sim_proc = self._start_simulator(parts.broker.endpoint)
        watcher = threading.Thread(target=self._watch_simulator, args=(parts.broker,), daemon=True)
        watcher.start()
        return progress

    def _record_decisions(self, facade) -> None:  # type: ignore[no-untyped-def]
        """``out_decisions.csv``: every binding, deletion, scale change, cordon and
        refusal, with the cluster at that instant (``broker/cluster/decisions.py``)."""
        from broker.cluster.cluster import JOB_ID_ANNOTATION
        from broker.cluster.decisions import DecisionLog

        clock = facade.clock

        def job_id_of(pod: dict) -> str:
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            return str(annotations.get(JOB_ID_ANNOTATION, ""))

        self.decisions = DecisionLog(lambda: clock.now_ns() / 1e9, clock.wall_epoch_ns(), job_id_of)
        facade.store.add_listener(self.decisions.on_commit)

    def _watch_progress(self, parts: _Wiring, progress: _ProgressView) -> None:
        """After each Batsim message: the progress bar, the no-progress report and
        ``--until`` (see :mod:`commands.guards`)."""
        from commands.guards import NoProgressGuard, StopAtGuard
        from commands.pausing import PauseGuard

        checks = [lambda p: progress.update(p)]
        if self.args.mode == "deterministic":
            self.pauser = PauseGuard(
                parts.broker,
                self.out,
                list(getattr(self.args, "pause_at", None) or []),
                list(getattr(self.args, "pause_conditions", None) or []),
                sys.stderr,
                self.prog,
                kubeconfig=getattr(self.args, "write_kubeconfig", None),
            )
            self.pauser.arm(parts.clock)
            self.pauser.install_signals()
            checks.append(lambda p: self.pauser.check(p.now_s))
        if self.args.no_progress_after > 0:
            self.no_progress = NoProgressGuard(
                parts.broker,
                self.args.no_progress_after,
                progress.warn,
                stop=getattr(self.args, "on_no_progress", "warn") == "stop",
            )
            checks.append(lambda p: self.no_progress.check(p.now_s))
        if self.args.until is not None:
            until = StopAtGuard(self.args.until)
            if parts.rt_clock is None:  # realtime: Batsim is called back every step anyway
                until.arm(parts.clock)
            checks.append(lambda p: until.check(p.now_s))

        def on_progress(p) -> None:  # type: ignore[no-untyped-def]
            for check in checks:
                check(p)

        parts.broker.on_progress = on_progress

    def _broker_endpoint(self) -> str:
        """Where the broker waits for the simulator: the embedded one runs in a thread of
        this process (see _EmbeddedSimulator); real Batsim connects over TCP."""
        return "tcp://127.0.0.1:*" if self.args.batsim else f"inproc://batsim-{os.getpid()}"

    def _take_down(self, parts: _Wiring, result) -> int | None:  # type: ignore[no-untyped-def]
        """Stop the schedulers, the simulator (waiting for its outputs after a good run),
        the broker, the facade and the clock, and remove the temporary folders; returns
        the simulator's exit code. Every step runs whatever the others did (a failing
        step is reported, never a reason to leave processes or folders behind)."""
        self._taking_down = True  # the simulator's exit from now on is ours
        sim_code = None

        def stop_simulator() -> None:
            nonlocal sim_code
            sim_code = self._stop_simulator(wait=result is not None and result.ok)

        if parts.launcher is not None:  # their CPU, before they are stopped
            from commands.process_figures import add_runtime_share, sample_cpu

            self.process_cpu = sample_cpu(list(parts.launcher.processes))
            if parts.clock is not None and parts.rt_clock is None:  # the runtime's cost
                try:
                    add_runtime_share(self.process_cpu, parts.clock.collect_figures())
                except Exception as exc:  # figures only: never a reason to fail the run
                    print(f"{self.prog}: runtime figures: {exc!r}", file=sys.stderr)
        steps = [
            ("schedulers", parts.launcher and parts.launcher.stop_all),
            ("simulator", stop_simulator),
            ("broker", parts.broker and parts.broker.close),
            ("facade", parts.facade and parts.facade.stop),
            ("facade endpoint", parts.endpoint and parts.endpoint.close),
            ("clock", parts.clock and parts.clock.close),
            ("realtime clock", parts.rt_clock and parts.rt_clock.close),
        ]
        if parts.incluster_dir is not None:
            steps.append(("in-cluster files", lambda: shutil.rmtree(parts.incluster_dir)))
        for what, step in steps:
            if not step:
                continue
            try:
                step()
            except Exception as exc:
                print(f"{self.prog}: stopping the {what}: {exc!r}", file=sys.stderr)
        return sim_code

    def _verdict(self, result, sim_code: int | None, reason: str) -> tuple[bool, str]:  # type: ignore[no-untyped-def]
        """A run is good when the broker saw the simulation to its end and the simulator
        exited cleanly; otherwise the reason says why. A simulator that exited before the
        end, with any code, is a failure whose reason is the simulator's own message: it
        came first, whatever the broker noticed next."""
        ok = result is not None and result.ok and sim_code == 0 and not self._sim_failure
        scheduler_failed = self._scheduler_failed or (
            result is not None and result.scheduler_failed
        )
        if self._sim_failure and not scheduler_failed:
            reason = self._sim_failure  # (a scheduler that died caused what followed)
        elif result is not None and result.ok and sim_code != 0:
            reason = (
                f"the simulator {_ended_how(sim_code)} after the end of the simulation: "
                f"{simulator_message(self.out / 'simulator.log')}"
            )
        return ok, reason

    def _report(self, result, ok: bool, reason: str, wall: float) -> bool:  # type: ignore[no-untyped-def]
        """Figures from the outputs, the manifest, the plots and the summary. Returns
        False when the disk refused an output (the summary then says what was kept)."""
        from commands import report
        from commands.cli import STARTED

        out = self.out
        figures = report.summarise(
            out / OUT_PREFIX,
            result.stats if result else {},
            wall,
            simulated_s=result.virtual_s if result is not None else None,
        )
        stopped_at = getattr(self, "stopped_at_s", None)
        written = all((out / name).exists() for name in OUT_FILES)
        complete = ok and stopped_at is None
        figures["outputs"] = ("complete" if complete else "partial") if written else "none"
        figures["seed"] = run_seed(self.args)
        if stopped_at is not None:
            figures["stopped_at_s"] = stopped_at
        if getattr(self, "stopped_by", None):
            figures["stopped_by"] = self.stopped_by
        if self.pacer is not None:
            figures["api_latency"] = self.pacer.figures()
        self._process_figures()
        guard = getattr(self, "no_progress", None)
        warnings = list(guard.reports) if guard is not None else []
        refused: list[str] = []
        service_plots = None
        try:
            service_plots = self._write_services(figures)
        except OSError as exc:
            refused.append(f"{SERVICES_CSV} ({exc.strerror or exc})")
        decisions = getattr(self, "decisions", None)
        if decisions is not None:
            try:
                decisions.finish()
                decisions.write(out / DECISIONS_CSV)
            except OSError as exc:
                refused.append(f"{DECISIONS_CSV} ({exc.strerror or exc})")
        try:
            self._write_manifest(figures, ok, reason, wall, warnings)
        except OSError as exc:
            refused.append(f"manifest.json ({exc.strerror or exc})")
        if not self.args.no_plots:
            started = _wall.perf_counter()
            try:
                if report.plot(out / OUT_PREFIX, out, self.node_names):
                    figures["plots_s"] = round(_wall.perf_counter() - started, 2)
                else:
                    figures["plots"] = "none (no job ran)"
                if service_plots:
                    service_plots()
            except OSError as exc:
                refused.append(f"plots ({exc.strerror or exc})")
            except Exception as exc:  # plots are a bonus: never lose the run for them
                print(f"{self.prog}: plots skipped ({exc!r})", file=sys.stderr)
        figures["outputs_dir"] = str(out)
        figures["command_wall_s"] = round(_wall.perf_counter() - STARTED, 2)
        if refused:
            if getattr(self, "traceback", None) and "manifest.json" in refused[0]:
                print(self.traceback, file=sys.stderr)  # it had nowhere else to go
            kept = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
            print(
                f"{self.prog}: could not write {'; '.join(refused)}; kept in {out}: "
                + (", ".join(kept) or "nothing"),
                file=sys.stderr,
            )
        if not self.args.quiet or not ok or figures["outputs"] != "complete" or refused:
            report.print_summary(figures, sys.stderr, title=self.prog)
            self._print_services(figures)
            from commands.process_figures import summary_lines

            for line in summary_lines(getattr(self, "per_process", {})):
                print(f"{self.prog}: {line}", file=sys.stderr)
        for line in self.pacer.summary() if self.pacer is not None else ():
            print(f"{self.prog}: busy polling: {line}", file=sys.stderr)  # a warning: always
        return not refused

    def _process_figures(self) -> None:
        """Per scheduler process: CPU and API requests (``commands/process_figures.py``),
        for the manifest and the summary."""
        from commands.process_figures import figures as process_figures

        parts = self._parts
        if parts is None or parts.launcher is None or parts.facade is None:
            self.per_process = {}
            return
        names = [proc.name for proc in parts.launcher.processes]
        self.per_process = process_figures(
            names, getattr(self, "process_cpu", {}), dict(parts.facade.api.request_counts)
        )
        try:
            exits = parts.launcher.exits()
        except Exception:  # a report must never be what fails the run
            exits = {}
        for name, ended in exits.items():
            self.per_process.setdefault(name, {}).update(ended=ended)

    def _print_services(self, figures: dict) -> None:
        for name, web in sorted((figures.get("services") or {}).items()):
            share = web["failed"] / web["requests"] if web["requests"] else 0.0
            print(
                f"service {name}: {web['requests']:,} requests, {web['failed']:,} failed "
                f"({share:.2%}), {web['model']} model; per tick in {self.out / SERVICES_CSV}",
                file=sys.stderr,
            )

    def _write_services(self, figures: dict):  # type: ignore[no-untyped-def]
        """out_services.csv (whatever ticks closed, even after a failure) and the
        services' figures in the manifest; returns the plotting step, if any."""
        driver = getattr(self._parts.broker, "services", None) if self._parts else None
        if driver is None:
            return None
        driver.finish()
        path = self.out / SERVICES_CSV
        write_rows(path, driver.rows)
        figures["services"] = driver.summary()
        figures["traffic_model_cpu_s"] = round(driver.cpu_s, 3)
        if self.args.no_plots:
            return None
        # the driver's: `timewarp broker` learns its services from the simulator
        timeouts = {s.spec.name: s.spec.traffic.timeout for s in driver.services}
        return lambda: plot_services(path, self.out, timeouts)

    # ----------------------------------------------------------------- simulator
    _sim_failure = ""
    _taking_down = False
    _scheduler_failed = False
    master_flags: list[str] = []  # real Batsim's -m (see _master_flags)

    def _simulator_arguments(self, endpoint: str) -> list[str]:
        """Batsim's command-line flags for this run (real Batsim takes them too)."""
        args = self.args
        # dynamic jobs: controller-made pods (ReplicaSet replacements, Job pods) are
        # registered as Batsim jobs (see broker/cluster/cluster.py), reusing profiles: without
        # --enable-profile-reuse Batsim drops a profile's name once a job of it has ended
        # and aborts when a later pod names it
        flags = ["-p", args.platform, "-e", str(self.out / OUT_PREFIX), "-s", endpoint,
                 "--enable-compute-sharing", "--enable-dynamic-jobs",
                 "--enable-profile-reuse"]  # fmt: skip
        for workload in args.workload:
            flags += ["-w", workload]
        if args.batsim:
            flags += self.master_flags
        else:
            flags += ["--reproducible", "-q"]  # the embedded one: byte-identical outputs
        return flags

    def _start_simulator(self, endpoint: str) -> subprocess.Popen | _EmbeddedSimulator:
        flags = self._simulator_arguments(endpoint)
        if not self.args.batsim:
            return _EmbeddedSimulator(flags, self.out / "simulator.log")
        log = open(self.out / "simulator.log", "wb")  # noqa: SIM115
        try:
            return subprocess.Popen(
                [self.args.batsim, *flags],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()

    def _watch_simulator(self, broker) -> None:  # type: ignore[no-untyped-def]
        """A simulator that ends before the simulation did, with any code (real Batsim
        exits 0 after a SimGrid deadlock), fails the run at once with its own words."""
        code = self.sim_proc.wait()
        if broker.ended or self._taking_down:
            return
        which = "real Batsim" if self.args.batsim else "the embedded simulator"
        log = self.out / "simulator.log"
        self._sim_failure = (
            f"{which} {_ended_how(code)} before the end of the simulation: "
            f"{simulator_message(log)} (see {log})"
        )
        broker.simulator_exited(self._sim_failure)

    def _stop_simulator(self, wait: bool) -> int | None:
        proc = self.sim_proc
        if proc is None:
            return None
        embedded = isinstance(proc, _EmbeddedSimulator)
        try:
            return proc.wait(30 if wait else 0.5)
        except subprocess.TimeoutExpired:
            if embedded:
                proc.stop.set()  # it writes its partial outputs, then returns
            else:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                return proc.wait(SIGTERM_GRACE_S)
            except subprocess.TimeoutExpired:
                if embedded:
                    return None  # a daemon thread: it dies with this process
                os.killpg(proc.pid, signal.SIGKILL)
                return proc.wait()

    # ----------------------------------------------------------------- manifest
    _facts: dict | None = None
    _facts_thread: threading.Thread | None = None

    def _input_files(self) -> list[str]:
        return [self.args.platform, *self.args.workload]

    def _gather_facts(self) -> None:
        import platform as _platform
        from importlib.metadata import PackageNotFoundError, version

        try:
            client = version("kubernetes")
        except PackageNotFoundError:
            client = None
        self._facts = {
            "timewarp": __version__,
            "python": _platform.python_version(),
            "kubernetes_client": client,
            "inputs": {path: _sha256(Path(path)) for path in self._input_files()},
        }

    def _write_manifest(
        self, figures: dict, ok: bool, reason: str, wall: float, warnings: list[str]
    ) -> None:
        from commands.modes import mode_parameters

        args = self.args
        if self._facts_thread is not None:
            self._facts_thread.join()  # long done, unless the run failed at once
        if self._facts is None:  # no scheduler was started
            self._gather_facts()
        manifest = {
            **(self._facts or {}),
            "simulator": args.batsim or "embedded",
            "mode": args.mode,
            "mode_parameters": mode_parameters(args),
            "arguments": sys.argv[1:],
            "schedulers": args.scheduler,
            "patch_modules": args.patch_module,
            "epoch_ns": args.epoch,
            "seed": run_seed(args),
            "ok": ok,
            "reason": reason,
            "outputs": figures["outputs"],
            "wall_s": round(wall, 3),
            "figures": figures,
            "warnings": warnings,
        }
        if getattr(self, "per_process", None):
            manifest["processes"] = self.per_process
        pauser = getattr(self, "pauser", None)
        if pauser is not None and pauser.pauses:
            manifest["pauses"] = pauser.pauses  # when and why (the outputs do not change)
        if getattr(self, "traceback", None):
            manifest["traceback"] = self.traceback
        text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
        write_text_atomically(self.out / "manifest.json", text)


class _EmbeddedSimulator:
    """``timewarp sim`` in a thread of this process: Batsim's protocol over ZeroMQ
    ``inproc://`` (same REQ/REP pattern, same JSON messages as over TCP), without an
    interpreter to start beside the scheduler's or a process hop per message. Stands in
    for the ``Popen`` of a separate simulator: ``wait``, and ``stop`` (set: it ends
    between two messages and writes its partial outputs, as on SIGTERM)."""

    def __init__(self, argv: list[str], log_path: Path) -> None:
        import zmq

        from simulator import cli as sim_cli

        parser = argparse.ArgumentParser(prog=sim_cli.PROG)
        sim_cli.add_arguments(parser)
        self.args = parser.parse_args(argv)
        self.stop = threading.Event()
        self.code: int | None = None
        self._done = threading.Event()
        self._log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by _finish
        sim = sim_cli.prepare(self.args, err=self._log)
        if isinstance(sim, int):
            self._finish(sim)
            return

        def run() -> None:
            name_os_thread()  # so /proc tells this thread's CPU from the broker's
            code = 1
            try:
                code = sim_cli.drive(
                    sim, self.args, stop=self.stop, context=zmq.Context.instance(), err=self._log
                )
            except BaseException:  # a bug, a full disk: end with the traceback, never hang
                with contextlib.suppress(Exception):  # the log may be what failed
                    traceback.print_exc(file=self._log)
            finally:
                self._finish(code)  # whatever happened, the run learns that this one ended

        threading.Thread(target=run, name="timewarp-sim", daemon=True).start()

    def _finish(self, code: int) -> None:
        self.code = code
        try:
            self._log.close()
        except OSError:
            pass  # a full disk refused the log's last bytes; the exit code still counts
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("timewarp sim", timeout or 0)
        assert self.code is not None
        return self.code


def _ended_how(code: int | None) -> str:
    if code is not None and code < 0:
        return f"was killed by {signal.Signals(-code).name}"  # Batsim aborts: SIGABRT
    return f"exited with code {code}"


def simulator_message(log: Path) -> str:
    """Why a simulator stopped, in its own words, from its log: the embedded simulator's
    ``timewarp sim:`` line (a deadlock report, a decision error); real Batsim's — that is
    SimGrid's — CRITICAL line ("Uncaught exception std::out_of_range: Bad config key:
    smpi/or", "Oops! Deadlock detected, …"), else an ERROR line, else the last line."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no simulator log)"
    for line in lines:
        if line.startswith("timewarp sim: "):
            return line.removeprefix("timewarp sim: ")
    for level in ("/CRITICAL] ", "/ERROR] "):
        for line in lines:
            head, sep, text = line.partition(level)
            if sep and not text.startswith("Current backtrace"):
                return text.strip()
    last = [line for line in lines if line.strip()]
    return last[-1].strip() if last else "(its log is empty)"


def _internal_error(exc: BaseException) -> str:
    """The gist of an unexpected exception: ``internal error: KeyError: 'x' at
    broker/cluster/cluster.py:123 in _admit`` (the full traceback goes to the manifest)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        try:
            name = Path(last.filename).resolve().relative_to(Path(__file__).resolve().parents[1])
        except ValueError:
            name = Path(last.filename)
        where = f" at {name}:{last.lineno} in {last.name}"
    return (
        f"internal error: {type(exc).__name__}: {exc}{where} (a bug in timewarp; the full "
        "traceback is in manifest.json)"
    )


def _stopped_result(broker, reason: str):  # type: ignore[no-untyped-def]
    """The broker's figures so far, for a run whose broker loop ended by an exception
    (a signal, --until, a bug) instead of returning its result."""
    try:
        return broker._result(False, reason)  # the same figures run() would have returned
    except Exception:
        return None


def _die_with_parent() -> None:
    """In the simulator's child process: SIGTERM when `timewarp simulate` dies, even by
    SIGKILL (Batsim waits for replies forever; the schedulers watch their broker)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _ProgressView:
    """A rich progress bar: simulated time, jobs done/total, wall time, speed-up. Its
    last frame shows the figures of the summary (:meth:`finish`)."""

    def __init__(self, total_jobs: int, disabled: bool, started: float, prog: str) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.console = Console(stderr=True)
        self.disabled = disabled or not self.console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]simulated {task.fields[now]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("jobs"),
            TextColumn("{task.fields[wall]} wall"),
            TextColumn("{task.fields[speedup]}"),
            console=self.console,
            disable=self.disabled,
        )
        self.task = self.progress.add_task(
            "sim", total=total_jobs or None, now="0 s", wall="0.0 s", speedup=""
        )
        self.total_jobs = total_jobs
        self.started = started  # the simulation's start, as for the summary's wall time
        self.jobs_dynamic = 0
        self.prog = prog

    def __enter__(self):  # type: ignore[no-untyped-def]
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        self.progress.__exit__(*exc)

    def update(self, p) -> None:  # type: ignore[no-untyped-def]
        if self.disabled:  # -q or no terminal: runs after every Batsim message, shows nothing
            return
        self.jobs_dynamic = p.jobs_dynamic
        self._show(p.now_s, _wall.perf_counter() - self.started, completed=p.jobs_done)

    def finish(self, now_s: float, wall_s: float) -> None:
        """The last frame: the end of the simulation and the wall time the summary uses."""
        self._show(now_s, wall_s)

    def _show(self, now_s: float, wall_s: float, completed: int | None = None) -> None:
        from commands.report import format_speedup, speedup

        total = (self.total_jobs + self.jobs_dynamic) or None  # controller-made pods too
        fields = {"now": f"{now_s:,.0f} s", "wall": f"{wall_s:.1f} s"}
        fields["speedup"] = format_speedup(speedup(now_s, wall_s))
        if completed is not None:
            fields["completed"] = completed
        self.progress.update(self.task, total=total, **fields)  # type: ignore[arg-type]

    def warn(self, text: str) -> None:
        """A warning above the bar (or on stderr when there is no bar)."""
        if self.disabled:
            print(f"{self.prog}: WARNING: {text}", file=sys.stderr, flush=True)
        else:
            from rich.markup import escape

            self.progress.console.print(f"[yellow]{self.prog}: WARNING:[/] {escape(text)}")
