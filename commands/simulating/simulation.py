"""One ``timewarp simulate`` run: wire the parts, start them, drive, take down, judge, report."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time as _wall
import traceback
from pathlib import Path

from commands.services_report import SERVICES_CSV
from commands.simulating import heap
from commands.simulating.options import TERMINATED_POD_GC_THRESHOLD, run_seed
from commands.simulating.outputs import (
    DECISIONS_CSV,
    OBSERVER_KUBECONFIG,
    OUT_FILES,
    PLOT_FILES,
    RUNNING_CSV,
    kubectl_line,
)
from commands.simulating.progress import ProgressView
from commands.simulating.reporting import Reporting
from commands.simulating.simulator import (
    EmbeddedSimulator,
    SimulatorSide,
    ended_how,
    simulator_message,
)
from commands.stopping import Interrupted, StopSignals
from timewarp.wire.stophold import critical


class Wiring:
    """The parts of one run, made in :meth:`Simulation._wire` and taken down in
    :meth:`Simulation._take_down`: the clock service, the facade's endpoint (then the
    facade), the launcher, the broker."""

    def __init__(self) -> None:
        self.clock = None
        self.rt_clock = None  # realtime mode: the scaled wall clock
        self.endpoint = None
        self.facade = None
        self.launcher = None
        self.broker = None
        self.incluster_dir: Path | None = None


class Simulation(SimulatorSide, Reporting):
    """One ``timewarp simulate`` run, in the order a reader would name its steps:
    wire the parts (:meth:`_wire`), start the schedulers (:meth:`_start_schedulers`),
    start the facade, broker and simulator (:meth:`_start_broker`), let the broker drive
    the simulation to its end (:meth:`_drive`), take everything down
    (:meth:`_take_down`), judge the run (:meth:`_verdict`) and report it
    (:meth:`_report`)."""

    prog = "timewarp simulate"
    _parts: Wiring | None = None

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
        self.sim_proc: subprocess.Popen | EmbeddedSimulator | None = None

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
        parts = self._parts = Wiring()
        result = None
        reason = ""
        stopped_at: StopAt | None = None
        no_progress: NoProgressStop | None = None
        with StopSignals(self.prog) as signals:
            try:
                try:
                    self._wire(parts)
                    self._start_schedulers(parts)
                    progress = self._start_broker(parts)
                    if heap.OWNED:  # the heap start-up built leaves the collector's walks, once:
                        # when SIMULATION_BEGINS has made the nodes, before the first pod
                        parts.broker.after_begin = heap.settle
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
                    reason = internal_error(exc)
                    self.traceback = traceback.format_exc()
            except Interrupted as exc:  # the first signal, met in one of the handlers above
                reason = reason or f"interrupted by {signal.Signals(exc.signum).name}"
            finally:
                # (no call before this try: a signal is checked for at calls, and one met
                # as the clean-up begins must not skip it)
                try:
                    signals.shield()  # from here on a signal is noted: the clean-up must end
                except Interrupted as exc:  # it came just now: noted as the others
                    reason = reason or f"interrupted by {signal.Signals(exc.signum).name}"
                if result is None and parts.broker is not None:
                    result = stopped_result(parts.broker, reason)
                sim_code = self._take_down(parts, result)
            wall = getattr(self, "sim_wall", None) or (_wall.perf_counter() - started)
            if stopped_at is not None:
                ok, reason = True, reason  # stopped where asked: a good, partial run
                self.stopped_at_s = stopped_at.t_s
            elif no_progress is not None:
                ok = False  # the report is the reason; the outputs are partial
            else:
                ok, reason = self._verdict(result, sim_code, reason)
            # the exit status says what the manifest says: a signal noted from here on
            # (the report being written) changes neither
            interrupted = signals.exit_code
            if interrupted:
                ok, reason = (
                    False,
                    reason or "interrupted by " + signal.Signals(interrupted - 128).name,
                )
            kept = self._report(result, ok, reason, wall)
        if not ok:
            print(f"{self.prog}: FAILED: {reason}", file=sys.stderr)
        if interrupted:
            return interrupted
        if not kept:
            return 1
        if no_progress is not None:
            return NO_PROGRESS_EXIT
        return 0 if ok else 1

    def _wire(self, parts: Wiring) -> None:
        """The clock service, the facade's endpoint (bound now, so schedulers can start
        before the facade exists) and the launcher, into ``parts`` as each is made (so a
        signal half-way leaves nothing behind: :meth:`_take_down` closes what exists)."""
        from broker.clock.service import DEFAULT_EPOCH_NS, ClockService
        from broker.facade.endpoint import Endpoint
        from broker.processes.launcher import Launcher

        args = self.args
        epoch_ns = args.epoch if args.epoch is not None else DEFAULT_EPOCH_NS
        # each part is made and recorded in one critical block (timewarp.wire.stophold):
        # a stop signal between the two would leave it unknown to the take-down — its
        # threads, sockets and folders left behind
        with critical:
            parts.clock = ClockService(
                mode=args.mode,
                epoch_ns=epoch_ns,
                stall_timeout=args.stall_timeout,
                on_stall=args.on_stall,
            )
        if args.mode == "realtime":
            from broker.drivers.realtime import ScaledWallClock

            with critical:
                parts.rt_clock = ScaledWallClock(args.speed, epoch_ns)
        with critical:
            parts.endpoint = Endpoint(tls=args.incluster)
        if args.write_kubeconfig:  # written as the first scheduler starts: HTTPS needed now
            parts.endpoint.enable_https()
        if args.incluster:
            with critical:
                parts.incluster_dir = Path(tempfile.mkdtemp(prefix="timewarp-sa-"))
        parts.launcher = Launcher(  # (makes nothing yet: its start() does)
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

    def _start_schedulers(self, parts: Wiring) -> None:
        """Schedulers first: their start-up (importing a Kubernetes client) is the
        longest, and they need only the clock and the facade's endpoint. The manifest's
        slow facts (package metadata, input hashes) are gathered meanwhile."""
        for command in self.args.scheduler:
            parts.launcher.start(command, cwd=self.args.cwd)
        self._facts_thread = threading.Thread(
            target=self._gather_facts, name="manifest-facts", daemon=True
        )
        self._facts_thread.start()

    def _start_broker(self, parts: Wiring) -> ProgressView:
        """The facade on the endpoint, the broker (the Batsim decision process of the
        chosen mode) and the simulator that connects to it."""
        from broker.clock.service import FacadeClock
        from broker.facade import Facade
        from commands.modes import make_broker

        args = self.args
        facade_clock = parts.rt_clock if parts.rt_clock is not None else FacadeClock(parts.clock)
        # every run serves people too: HTTPS with the run's CA, the observer's kubeconfig
        self.observer_kubeconfig = parts.endpoint.write_observer_kubeconfig(
            self.out / OBSERVER_KUBECONFIG
        )
        with critical:  # made, recorded and started together (see _wire)
            parts.facade = Facade(facade_clock, endpoint=parts.endpoint, hold_until_cluster=True)
            if args.mode != "realtime":  # requests belong to the runtime that sent them
                parts.facade.attribute_by_pid(parts.clock.registry.process_of_pid)
            parts.facade.start()
        if not args.quiet:
            line = kubectl_line(self.observer_kubeconfig)
            print(f"{self.prog}: look inside: {line}", file=sys.stderr)
        progress = ProgressView(
            self.total_jobs, disabled=args.quiet, started=self.started, prog=self.prog
        )
        self._record_decisions(parts.facade)
        with critical:
            parts.broker = make_broker(
                args,
                endpoint=self._broker_endpoint(),
                clock=parts.clock,
                facade=parts.facade,
                launcher=parts.launcher,
                rt_clock=parts.rt_clock,
                services=self.services,
                declared=self.declared,
                terminated_pod_gc_threshold=getattr(
                    args, "terminated_pod_gc_threshold", TERMINATED_POD_GC_THRESHOLD
                ),
                reply_transit=self.reply_transit,
                sock=self._broker_socket(),
            )
        parts.broker.platform_known = self.platform_known
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
        with critical:  # real Batsim: a process, stopped by the take-down once recorded
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

        self.decisions = DecisionLog(
            lambda: clock.now_ns() / 1e9, clock.wall_epoch_ns(), job_id_of, facade.store.types
        )
        facade.store.add_listener(self.decisions.on_commit, skip=("events",))

    def _watch_progress(self, parts: Wiring, progress: ProgressView) -> None:
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
                # the people's kubeconfig: every run writes one (read-only observer)
                kubeconfig=getattr(self.args, "write_kubeconfig", None)
                or str(self.observer_kubeconfig),
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
        this process and passes message objects (``local://``, simulator/local_link.py,
        see EmbeddedSimulator); real Batsim connects over TCP."""
        if self.args.batsim:
            return "tcp://127.0.0.1:*"
        return f"local://batsim-{os.getpid()}-{id(self):x}"

    def _broker_socket(self):  # type: ignore[no-untyped-def]
        """A Batsim socket bound before the run began (``timewarp broker``), or None:
        the broker binds :meth:`_broker_endpoint` itself."""
        return None

    def _take_down(self, parts: Wiring, result) -> int | None:  # type: ignore[no-untyped-def]
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
                f"the simulator {ended_how(sim_code)} after the end of the simulation: "
                f"{simulator_message(self.out / 'simulator.log')}"
            )
        return ok, reason


def internal_error(exc: BaseException) -> str:
    """The gist of an unexpected exception: ``internal error: KeyError: 'x' at
    broker/cluster/cluster.py:123 in _admit`` (the full traceback goes to the manifest)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        try:
            name = Path(last.filename).resolve().relative_to(Path(__file__).resolve().parents[2])
        except ValueError:
            name = Path(last.filename)
        where = f" at {name}:{last.lineno} in {last.name}"
    return (
        f"internal error: {type(exc).__name__}: {exc}{where} (a bug in timewarp; the full "
        "traceback is in manifest.json)"
    )


def stopped_result(broker, reason: str):  # type: ignore[no-untyped-def]
    """The broker's figures so far, for a run whose broker loop ended by an exception
    (a signal, --until, a bug) instead of returning its result."""
    try:
        return broker._result(False, reason)  # the same figures run() would have returned
    except Exception:
        return None
