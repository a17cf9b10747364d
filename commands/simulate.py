"""``timewarp simulate``: the simulator, the broker and the scheduler(s) in one command.

    timewarp simulate --scheduler 'python -m sample_schedulers.default_like --scheduler-name default' \\
        -p examples/inputs/cluster16.xml -w examples/inputs/burst_40_delay170.json -o out/

Each ``--scheduler`` is an ordinary command line, run under ``timewarp run`` (its own
modules and the ``--patch-module`` packages are rewritten on import) with its own token
and ``KUBECONFIG``. Outputs in ``-o``: Batsim's CSVs (``out_jobs.csv``,
``out_schedule.csv``, ``out_machine_states.csv``), ``manifest.json`` (versions,
arguments, input hashes, figures), ``gantt.png`` and ``utilisation.png``, and one log per
process. Ctrl-C or any failure stops everything, keeps what was written, and exits
non-zero with the reason; the embedded simulator then writes *partial* CSVs (the jobs
that ended so far), marked ``"outputs": "partial"`` in manifest.json and in the summary
(outputs of an earlier run in the same directory are removed first, so what is there is
this run's).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time as _wall
from pathlib import Path

from commands.run import parse_epoch, positive_seconds
from commands.services_report import SERVICES_CSV, plot_services, write_rows
from timewarp import __version__

OUT_PREFIX = "out"
SIGTERM_GRACE_S = 20.0  # time a stopped simulator gets to write partial outputs
OUT_FILES = tuple(f"{OUT_PREFIX}_{kind}.csv" for kind in ("jobs", "schedule", "machine_states"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scheduler",
        action="append",
        required=True,
        metavar="CMD",
        help="a scheduler's ordinary command line (repeatable: several schedulers at once)",
    )
    parser.add_argument("-p", "--platform", required=True, help="SimGrid platform XML")
    parser.add_argument(
        "-w", "--workload", action="append", required=True, help="Batsim workload JSON (repeatable)"
    )
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory")
    parser.add_argument(
        "--patch-module",
        action="append",
        default=[],
        metavar="PKG",
        help="also rewrite this installed package on import (e.g. apscheduler)",
    )
    parser.add_argument(
        "--mode",
        choices=("deterministic", "lockstep", "realtime"),
        default="deterministic",
        help="time mode (lockstep and realtime: see docs/broker.md)",
    )
    from broker.modes_cli import add_mode_arguments
    from broker.pacing import add_pacing_arguments

    add_mode_arguments(parser)
    add_pacing_arguments(parser)
    parser.add_argument(
        "--batsim", metavar="PATH", help="use real Batsim at PATH instead of the embedded simulator"
    )
    parser.add_argument(
        "--write-kubeconfig",
        metavar="PATH",
        help="also write the (first) scheduler's kubeconfig here",
    )
    parser.add_argument(
        "--incluster",
        action="store_true",
        help="serve HTTPS and give schedulers in-cluster configuration",
    )
    parser.add_argument(
        "--freeze-unpatched",
        action="store_true",
        help="unpatched modules read virtual wall-clock time too",
    )
    parser.add_argument(
        "--no-import-hook",
        action="store_true",
        help="rewrite nothing on import: the schedulers were patched ahead of time "
        "(`timewarp patch`)",
    )
    parser.add_argument(
        "--epoch", type=parse_epoch, default=None, help="wall-clock time at virtual 0"
    )
    parser.add_argument("--stall-timeout", type=positive_seconds, default=10.0, metavar="SECONDS")
    parser.add_argument("--on-stall", choices=("advance", "stop"), default="advance")
    parser.add_argument("--cwd", metavar="DIR", help="working directory of the scheduler processes")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _fail(message: str, code: int = 2) -> int:
    print(f"timewarp simulate: {message}", file=sys.stderr)
    return code


def _sha256(path: Path) -> str:
    import hashlib  # not before the schedulers start: manifest facts are gathered later

    return hashlib.sha256(path.read_bytes()).hexdigest()


def run(args: argparse.Namespace) -> int:
    from simulator.platform import PlatformError, load_platform
    from simulator.workload import WorkloadError, load_workload

    out = Path(args.output)
    try:
        platform = load_platform(args.platform)
        workloads = [
            load_workload(w, f"w{i}", len(platform.compute)) for i, w in enumerate(args.workload)
        ]
    except FileNotFoundError as exc:
        return _fail(f"no such file: {exc.filename}")
    except (PlatformError, WorkloadError) as exc:
        return _fail(str(exc))
    from broker.input_check import InputError, check_inputs

    try:  # the Kubernetes side: node and pod shapes, pods that could never run
        check_inputs(platform, workloads)
    except InputError as exc:
        return _fail(str(exc))
    from broker.modes_cli import ModeArgumentError, check_mode_arguments

    try:
        check_mode_arguments(args)
    except ModeArgumentError as exc:
        return _fail(str(exc))
    from broker.pacing import PacingArgumentError, check_pacing_arguments

    try:
        check_pacing_arguments(args)
    except PacingArgumentError as exc:
        return _fail(str(exc))
    from patcher.launch import LaunchError, parse_launch

    for command in args.scheduler:
        try:
            if not parse_launch(shlex.split(command)).argv:
                return _fail(f"--scheduler: empty command {command!r}")
        except (LaunchError, ValueError) as exc:  # ValueError: shlex's unbalanced quotes
            return _fail(f"--scheduler {command!r}: {exc}")
    if args.batsim and shutil.which(args.batsim) is None:
        return _fail(f"--batsim: program not found: {args.batsim!r}")
    total_jobs = sum(len(w.jobs) for w in workloads)
    services = [s for w in workloads for s in w.services]
    names = [s.name for s in services]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        return _fail(f"service {duplicate!r} is declared in more than one workload file")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(f"cannot create output directory {out}: {exc.strerror}")
    return _Simulation(args, out, total_jobs, services).run()


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
    _parts: _Wiring | None = None

    """One ``timewarp simulate`` run, in the order a reader would name its steps:
    wire the parts (:meth:`_wire`), start the schedulers (:meth:`_start_schedulers`),
    start the facade, broker and simulator (:meth:`_start_broker`), let the broker drive
    the simulation to its end (:meth:`_drive`), take everything down
    (:meth:`_take_down`), judge the run (:meth:`_verdict`) and report it
    (:meth:`_report`)."""

    def __init__(
        self, args: argparse.Namespace, out: Path, total_jobs: int, services: list | None = None
    ) -> None:
        self.args = args
        self.out = out
        self.total_jobs = total_jobs
        self.pacer = None
        self.services = services or []  # the workloads' services with traffic
        self.sim_proc: subprocess.Popen | _EmbeddedSimulator | None = None

    def run(self) -> int:
        for name in (*OUT_FILES, SERVICES_CSV):  # an earlier run's outputs must not pass
            (self.out / name).unlink(missing_ok=True)  # for this run's
        from broker.launcher import SchedulerFailed

        started = _wall.perf_counter()
        parts = self._parts = self._wire()
        result = None
        reason = ""
        interrupted = False

        def _terminated(signum, frame):  # type: ignore[no-untyped-def]
            raise KeyboardInterrupt  # SIGTERM stops everything like Ctrl-C does

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _terminated)
        try:
            self._start_schedulers(parts)
            progress = self._start_broker(parts)
            with progress:
                result = parts.broker.run()
            self.sim_wall = _wall.perf_counter() - started
            reason = result.reason
        except SchedulerFailed as exc:
            reason = str(exc)
        except KeyboardInterrupt:
            interrupted = True
            reason = "interrupted (Ctrl-C or SIGTERM)"
        finally:
            sim_code = self._take_down(parts, result)
        wall = getattr(self, "sim_wall", None) or (_wall.perf_counter() - started)
        ok, reason = self._verdict(result, sim_code, reason)
        self._report(result, ok, reason, wall)
        if not ok:
            print(f"timewarp simulate: FAILED: {reason}", file=sys.stderr)
            return 130 if interrupted else 1
        return 0

    def _wire(self) -> _Wiring:
        """The clock service, the facade's endpoint (bound now, so schedulers can start
        before the facade exists) and the launcher."""
        from broker.clock_service import DEFAULT_EPOCH_NS, ClockService
        from broker.facade.endpoint import Endpoint
        from broker.launcher import Launcher

        args = self.args
        parts = _Wiring()
        epoch_ns = args.epoch if args.epoch is not None else DEFAULT_EPOCH_NS
        parts.clock = ClockService(
            mode=args.mode,
            epoch_ns=epoch_ns,
            stall_timeout=args.stall_timeout,
            on_stall=args.on_stall,
        )
        if args.mode == "realtime":
            from broker.realtime import ScaledWallClock

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
        )
        return parts

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
        from broker.clock_service import FacadeClock
        from broker.facade import Facade
        from broker.modes_cli import make_broker

        args = self.args
        facade_clock = parts.rt_clock if parts.rt_clock is not None else FacadeClock(parts.clock)
        parts.facade = Facade(facade_clock, endpoint=parts.endpoint).start()
        progress = _ProgressView(self.total_jobs, disabled=args.quiet)
        parts.broker = make_broker(
            args,
            # the embedded simulator runs in a thread of this process (see
            # _EmbeddedSimulator); real Batsim connects over TCP
            endpoint="tcp://127.0.0.1:*" if args.batsim else f"inproc://batsim-{os.getpid()}",
            clock=parts.clock,
            facade=parts.facade,
            launcher=parts.launcher,
            rt_clock=parts.rt_clock,
            services=self.services,
        )
        parts.broker.on_progress = progress.update
        if args.mode == "deterministic":
            from broker.pacing import Pacer

            self.pacer = Pacer(
                parts.clock,
                api_latency_ns=args.api_latency_ns,
                poll_threshold=args.poll_threshold,
                poll_latency_ns=args.poll_latency_ns,
            ).attach(parts.facade)
            # the cluster changing is progress for the stall guard; API traffic is not
            parts.clock.set_progress_probe(parts.facade.revision)
        self.sim_proc = self._start_simulator(parts.broker.endpoint)
        watcher = threading.Thread(target=self._watch_simulator, args=(parts.broker,), daemon=True)
        watcher.start()
        return progress

    def _take_down(self, parts: _Wiring, result) -> int | None:  # type: ignore[no-untyped-def]
        """Stop the schedulers, the simulator (waiting for its outputs after a good run),
        the broker, the facade and the clock; returns the simulator's exit code."""
        parts.launcher.stop_all()
        sim_code = self._stop_simulator(wait=result is not None and result.ok)
        if parts.broker is not None:
            parts.broker.close()
        if parts.facade is not None:
            parts.facade.stop()
        parts.endpoint.close()
        parts.clock.close()
        if parts.rt_clock is not None:
            parts.rt_clock.close()
        if parts.incluster_dir is not None:
            shutil.rmtree(parts.incluster_dir, ignore_errors=True)
        return sim_code

    def _verdict(self, result, sim_code: int | None, reason: str) -> tuple[bool, str]:  # type: ignore[no-untyped-def]
        """A run is good when the broker saw the simulation to its end and the simulator
        exited cleanly; otherwise the reason says why."""
        ok = result is not None and result.ok and sim_code == 0
        if result is not None and result.ok and sim_code != 0:
            reason = f"the simulator exited with code {sim_code}; see {self.out / 'simulator.log'}"
        if self._sim_failure and not reason:
            reason = self._sim_failure
        return ok, reason

    def _report(self, result, ok: bool, reason: str, wall: float) -> None:  # type: ignore[no-untyped-def]
        """Figures from the outputs, the manifest, the plots and the summary."""
        from commands import report

        figures = report.summarise(self.out / OUT_PREFIX, result.stats if result else {}, wall)
        written = all((self.out / name).exists() for name in OUT_FILES)
        figures["outputs"] = ("complete" if ok else "partial") if written else "none"
        if self.pacer is not None:
            figures["api_latency"] = self.pacer.figures()
        service_plots = self._write_services(figures)
        self._write_manifest(figures, ok, reason, wall)
        if not self.args.no_plots and (self.out / f"{OUT_PREFIX}_jobs.csv").exists():
            try:
                report.plot(self.out / OUT_PREFIX, self.out)
            except Exception as exc:  # plots are a bonus: never lose the run for them
                print(f"timewarp simulate: plots skipped ({exc})", file=sys.stderr)
        if service_plots:
            try:
                service_plots()
            except Exception as exc:
                print(f"timewarp simulate: service plots skipped ({exc})", file=sys.stderr)
        report.print_summary(figures, sys.stderr)
        for line in self.pacer.summary() if self.pacer is not None else ():
            print(f"timewarp simulate: busy polling: {line}", file=sys.stderr)
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
        timeouts = {s.name: s.traffic.timeout for s in self.services}
        return lambda: plot_services(path, self.out, timeouts)

    # ----------------------------------------------------------------- simulator
    _sim_failure = ""

    def _simulator_arguments(self, endpoint: str) -> list[str]:
        """Batsim's command-line flags for this run (real Batsim takes them too)."""
        args = self.args
        # dynamic jobs: controller-made pods (ReplicaSet replacements, Job pods) are
        # registered as Batsim jobs (see broker/cluster.py)
        flags = ["-p", args.platform, "-e", str(self.out / OUT_PREFIX), "-s", endpoint,
                 "--enable-compute-sharing", "--enable-dynamic-jobs"]  # fmt: skip
        for workload in args.workload:
            flags += ["-w", workload]
        if not args.batsim:
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
        code = self.sim_proc.wait()
        if code != 0:
            tail = (self.out / "simulator.log").read_text(errors="replace").splitlines()[-15:]
            self._sim_failure = f"the simulator exited with code {code}:\n" + "\n".join(tail)
            broker.batsim_timeout_s = 0.5  # stop waiting for messages that will not come

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

    def _gather_facts(self) -> None:
        import platform as _platform
        from importlib.metadata import PackageNotFoundError, version

        args = self.args
        try:
            client = version("kubernetes")
        except PackageNotFoundError:
            client = None
        self._facts = {
            "timewarp": __version__,
            "python": _platform.python_version(),
            "kubernetes_client": client,
            "inputs": {path: _sha256(Path(path)) for path in [args.platform, *args.workload]},
        }

    def _write_manifest(self, figures: dict, ok: bool, reason: str, wall: float) -> None:
        from broker.modes_cli import mode_parameters

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
            "ok": ok,
            "reason": reason,
            "outputs": figures["outputs"],
            "wall_s": round(wall, 3),
            "figures": figures,
        }
        tmp = self.out / "manifest.json.tmp"
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.out / "manifest.json")


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
            try:
                code = sim_cli.drive(
                    sim, self.args, stop=self.stop, context=zmq.Context.instance(), err=self._log
                )
            except Exception:  # a bug must end the run with its traceback, not hang it
                import traceback

                traceback.print_exc(file=self._log)
                code = 1
            self._finish(code)

        threading.Thread(target=run, name="timewarp-sim", daemon=True).start()

    def _finish(self, code: int) -> None:
        self.code = code
        self._log.close()
        self._done.set()

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("timewarp sim", timeout or 0)
        assert self.code is not None
        return self.code


def _die_with_parent() -> None:
    """In the simulator's child process: SIGTERM when `timewarp simulate` dies, even by
    SIGKILL (Batsim waits for replies forever; the schedulers watch their broker)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _ProgressView:
    """A rich progress bar: simulated time, jobs done/total, wall time, speed-up."""

    def __init__(self, total_jobs: int, disabled: bool) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = Console(stderr=True)
        self.disabled = disabled or not self.console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]simulated {task.fields[now]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("jobs"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[speedup]}"),
            console=self.console,
            disable=self.disabled,
        )
        self.task = self.progress.add_task("sim", total=total_jobs or None, now="0 s", speedup="")
        self.total_jobs = total_jobs
        self.started = _wall.perf_counter()

    def __enter__(self):  # type: ignore[no-untyped-def]
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        self.progress.__exit__(*exc)

    def update(self, p) -> None:  # type: ignore[no-untyped-def]
        wall = _wall.perf_counter() - self.started
        speed = f"{p.now_s / wall:,.0f}x" if wall > 0 else ""
        total = (self.total_jobs + p.jobs_dynamic) or None  # controller-made pods count too
        self.progress.update(
            self.task, completed=p.jobs_done, total=total, now=f"{p.now_s:,.0f} s", speedup=speed
        )
