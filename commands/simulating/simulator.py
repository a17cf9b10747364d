"""The simulator side of a run: Batsim's flags, the embedded simulator in a thread or real
Batsim in a child process, its watch and its stop."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

from commands.simulating.outputs import OUT_PREFIX
from commands.threadname import name_os_thread
from simulator import local_link
from simulator.protocol import NO_NETWORK, ReplyTransit

SIGTERM_GRACE_S = 20.0  # time a stopped simulator gets to write partial outputs


class SimulatorSide:
    """The simulator of a :class:`~commands.simulating.simulation.Simulation`: the embedded
    one in a thread, or real Batsim in a child process; started, watched, stopped."""

    args: argparse.Namespace
    out: Path
    sim_proc: subprocess.Popen | EmbeddedSimulator | None = None

    _sim_failure = ""
    _taking_down = False
    _scheduler_failed = False
    master_flags: list[str] = []  # real Batsim's -m (see master_flags)
    # what each reply event costs on the platform's network (the broker's CALL_ME_LATER
    # rule), and whether the platform is known at all (timewarp broker without --platform)
    reply_transit: ReplyTransit = NO_NETWORK
    platform_known = True

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

    def _start_simulator(self, endpoint: str) -> subprocess.Popen | EmbeddedSimulator:
        flags = self._simulator_arguments(endpoint)
        if not self.args.batsim:
            return EmbeddedSimulator(flags, self.out / "simulator.log")
        log = open(self.out / "simulator.log", "wb")  # noqa: SIM115
        try:
            return subprocess.Popen(
                [self.args.batsim, *flags],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        finally:
            log.close()

    def _watch_simulator(self, broker) -> None:  # type: ignore[no-untyped-def]
        """A simulator that ends before the simulation did, with any code (real Batsim
        exits 0 after a SimGrid deadlock), fails the run at once with its own words."""
        code = self.sim_proc.wait()
        if broker.ended or self._taking_down or broker.stopped_simulator:
            return
        which = "real Batsim" if self.args.batsim else "the embedded simulator"
        log = self.out / "simulator.log"
        self._sim_failure = broker.explain_exit(
            f"{which} {ended_how(code)} before the end of the simulation: "
            f"{simulator_message(log)} (see {log})"
        )
        broker.simulator_exited(self._sim_failure)

    def _stop_simulator(self, wait: bool) -> int | None:
        proc = self.sim_proc
        if proc is None:
            return None
        embedded = isinstance(proc, EmbeddedSimulator)
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


class EmbeddedSimulator:
    """``timewarp sim`` in a thread of this process: Batsim's protocol as message objects
    over a ``local://`` link (simulator/local_link.py: the same REQ/REP order, no JSON nor
    socket), without an interpreter to start beside the scheduler's or a process hop per
    message; ``inproc://`` (JSON over ZeroMQ) works too. Stands in
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
        self._pending: Callable[[], None] | None = None  # hosted, not run yet
        self._log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by _finish
        sim = sim_cli.prepare(self.args, err=self._log)
        if isinstance(sim, int):
            self._finish(sim)
            return

        def run() -> None:
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

        endpoint = self.args.socket_endpoint
        if endpoint.startswith(local_link.SCHEME):
            # hosted: the broker's thread runs it (simulator/local_link.py), or, if the
            # broker never does, the one that stops it (wait, below)
            self._pending = run
            self._claim = threading.Lock()
            local_link.connect(endpoint).guest = self._run_pending
            return

        def in_thread() -> None:
            name_os_thread()  # so /proc tells this thread's CPU from the broker's
            run()

        threading.Thread(target=in_thread, name="timewarp-sim", daemon=True).start()

    def _run_pending(self) -> None:
        """The hosted run, once, in the calling thread (later calls do nothing)."""
        with self._claim:
            run, self._pending = self._pending, None
        if run is not None:
            run()

    def _finish(self, code: int) -> None:
        self.code = code
        try:
            self._log.close()
        except OSError:
            pass  # a full disk refused the log's last bytes; the exit code still counts
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> int:
        if self._pending is not None and self.stop.is_set():
            # hosted but never run by the broker (it failed first): stopped, it writes
            # its outputs as a stopped thread would
            self._run_pending()
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("timewarp sim", timeout or 0)
        assert self.code is not None
        return self.code


def ended_how(code: int | None) -> str:
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


def die_with_parent() -> None:
    """In the simulator's child process: SIGTERM when `timewarp simulate` dies, even by
    SIGKILL (Batsim waits for replies forever; the schedulers watch their broker)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
