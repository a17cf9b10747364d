"""Scheduler processes: started under ``timewarp run``, each with its own token and
kubeconfig, watched until the end.

A scheduler that exits (whatever its code) before the simulation ended is a failure:
:meth:`Launcher.check` raises :class:`SchedulerFailed` naming it, with its exit code and
the end of its log. At the end every process group is terminated (then killed), and so is
every process that left its group (``setsid``, a daemon's double fork): each carries the
run's tag in its environment (:mod:`broker.processes.proctree`), so no orphan survives the run.

Command lines are taken as people write them (``env PYTHONPATH=deps python x.py``, a
nested ``timewarp run [OPTIONS] -- CMD``: see :mod:`patcher.launch`), and every path
handed to a scheduler is absolute (it may run in another directory, ``--cwd``). A
scheduler that calls the API without having joined the virtual clock (its interpreter
never ran timewarp's start-up hook) runs on the wall clock: it is stopped at its first
request and reported by name, with the likely cause — never left to run in real time.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from broker.clock.service import ClockService
from broker.facade.endpoint import Endpoint
from broker.processes import proctree
from patcher import launch
from timewarp.wire import clockproto
from timewarp.wire.stophold import critical

if TYPE_CHECKING:
    from broker.facade import Facade


# How long a process that said bye (its last non-daemon thread ended) may take to exit
# before the run is stopped without its exit code: interpreter shutdown on a loaded machine.
EXIT_WAIT_S = 30.0
STOP_GRACE_S = 15.0  # SIGTERM -> SIGKILL at the end of a run (see Launcher.stop_all)


class SchedulerFailed(RuntimeError):
    pass


@dataclass
class SchedulerProcess:
    name: str
    command: list[str]
    log_path: Path
    kubeconfig: Path
    popen: subprocess.Popen | None = None
    returncode: int | None = None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


class Launcher:
    def __init__(
        self,
        *,
        clock: ClockService,
        facade: Endpoint | Facade,  # what the schedulers connect to (a Facade is one too)
        out_dir: Path,
        patch_modules: Sequence[str] = (),
        freeze_unpatched: bool = False,
        incluster_dir: Path | None = None,
        extra_kubeconfig: Path | None = None,
        virtual: bool = True,
        import_hook: bool = True,
        seed: int = launch.DEFAULT_SEED,
        profile_dir: Path | None = None,
    ) -> None:
        self.clock = clock
        self.facade = facade
        self.out_dir = Path(out_dir).resolve()  # kubeconfigs must resolve from any --cwd
        self.patch_modules = list(patch_modules)
        self.freeze_unpatched = freeze_unpatched
        self.incluster_dir = incluster_dir
        self.extra_kubeconfig = extra_kubeconfig
        self.virtual = virtual
        self.import_hook = import_hook
        self.seed = seed  # the run's: each process's is derived from it and its name
        self.profile_dir = profile_dir  # --profile: each process writes its profile there
        self.processes: list[SchedulerProcess] = []
        # every process the schedulers start carries it, whatever session it moves to
        self.run_tag = proctree.new_tag()
        self._finishing = False
        self._lock = threading.Lock()
        self._unjoined: dict[str, str] = {}  # name -> why it was stopped (never joined)
        # exit 0 ends that process only (`--scheduler-exit continue`, the default); off:
        # any exit before the simulation's end fails the run
        self.zero_exit_continues = True
        self._finished: set[str] = set()  # processes that ended with exit 0, run going on
        # processes still there ``grace`` s of wall time after stop_all's SIGTERM: killed
        self._killed: dict[str, float] = {}  # name -> the grace they had
        # each process's own temporary directory, as a container's /tmp is its own: what
        # a program leaves there (kubernetes.dynamic's discovery cache, keyed by the
        # API's host:port) is never read by another process or run
        self._tmp_root: Path | None = None
        if virtual:
            facade.tokens.add_first_request_listener(self._first_request)

    def start(
        self, command: str | Sequence[str], *, name: str | None = None, cwd: str | None = None
    ) -> SchedulerProcess:
        # One critical block (timewarp.wire.stophold): the command's first stop signal,
        # raised between the process's start and its place in ``processes``, left a
        # scheduler that stop_all never stopped (and a private TMPDIR never removed).
        with critical:
            return self._start(command, name=name, cwd=cwd)

    def _start(
        self, command: str | Sequence[str], *, name: str | None, cwd: str | None
    ) -> SchedulerProcess:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("empty scheduler command")
        parsed = launch.parse_launch(argv)  # LaunchError: the caller checked beforehand
        name = name or f"scheduler-{len(self.processes)}"
        token = self.facade.add_token(name)
        kubeconfig = self.out_dir / f"{name}.kubeconfig"
        self.facade.write_kubeconfig(kubeconfig, name)
        if self.extra_kubeconfig is not None and not self.processes:
            # the people's (observer) kubeconfig; a scheduler that loads it from a fixed
            # path acts as itself all the same (requests are attributed by runtime)
            self.facade.write_observer_kubeconfig(self.extra_kubeconfig)
        env = parsed.environment(dict(os.environ))
        env["KUBECONFIG"] = str(kubeconfig)
        env["PYTHONUNBUFFERED"] = "1"
        env[proctree.TAG_ENV] = self.run_tag
        private_tmp = self._private_tmp(name)
        env["TMPDIR"] = env["TMP"] = env["TEMP"] = str(private_tmp)
        if self.incluster_dir is not None:
            env.update(self.facade.write_incluster(self.incluster_dir.resolve() / name, name))
        # `python` is timewarp's interpreter in every mode (realtime ran PATH's: issue 27)
        import_hook = self.virtual and self.import_hook and parsed.import_hook
        wrapped = launch.resolve_command(parsed.argv, rewrite_script=import_hook)
        if self.virtual:
            env[clockproto.ENV_ENDPOINT] = self.clock.endpoint
            env[clockproto.ENV_NAME] = name
            env[clockproto.ENV_BROKER_PID] = str(os.getpid())
            env[clockproto.ENV_FACADE] = f"{self.facade.host}:{self.facade.port}"
            # what `timewarp run --name NAME -- CMD` would exec, without its interpreter
            # start-up on the way (the scheduler's start-up is on the critical path)
            launch.runtime_environment(
                env,
                patch_modules=[*self.patch_modules, *parsed.patch_modules],
                import_hook=import_hook,
                freeze_unpatched=self.freeze_unpatched or parsed.freeze_unpatched,
                seed=launch.process_seed(self.seed, name),
            )
            if self.profile_dir is not None:
                env[clockproto.ENV_PROFILE_DIR] = str(self.profile_dir.resolve())
            # one credential per process: its facade token also opens the clock
            env[clockproto.ENV_TOKEN] = self.clock.expect(name, token)
        proc = SchedulerProcess(name, argv, self.out_dir / f"{name}.log", kubeconfig)
        log = open(proc.log_path, "wb")  # noqa: SIM115 - owned by the child
        try:
            proc.popen = subprocess.Popen(
                wrapped,
                env=env,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            if self.virtual:
                self.clock.process_gone(name)
            raise SchedulerFailed(
                f"cannot start scheduler {name!r} ({shlex.join(argv)}): {exc.strerror}"
            ) from exc
        finally:
            log.close()
        self.processes.append(proc)
        threading.Thread(target=self._reap, args=(proc,), name=f"reap-{name}", daemon=True).start()
        return proc

    def _private_tmp(self, name: str) -> Path:
        """A fresh, empty temporary directory for the process ``name`` (removed with the
        others by :meth:`stop_all`)."""
        if self._tmp_root is None:
            self._tmp_root = Path(tempfile.mkdtemp(prefix="timewarp-tmp-"))
        path = self._tmp_root / name
        path.mkdir()
        return path

    def _first_request(self, name: str) -> None:
        """The facade's first request with ``name``'s token (a facade thread). A process
        that has not joined the clock by then never will: its runtime would have joined
        before the program ran. Stop it now, before it acts on the wall clock."""
        if self._finishing or not self.clock.registry.never_joined(name):
            return
        proc = next((p for p in self.processes if p.name == name), None)
        if proc is None or proc.popen is None:
            return
        why = (
            f"scheduler {name!r} ({shlex.join(proc.command)}) called the Kubernetes API "
            "without having joined the virtual clock: it was running on the wall clock, "
            f"so it was stopped. Likely cause: {unjoined_cause(proc.command)}"
        )
        with self._lock:
            self._unjoined.setdefault(name, why)
        try:
            os.killpg(proc.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _reap(self, proc: SchedulerProcess) -> None:
        assert proc.popen is not None
        code = proc.popen.wait()
        with self._lock:
            proc.returncode = code
        if self.virtual:
            self.clock.process_gone(proc.name, code)

    def exits(self) -> dict[str, dict[str, object]]:
        """Each process that ended before the run did: its exit code and the virtual
        instant it went (seconds; None if it never joined the clock); and each that
        :meth:`stop_all` killed: ``{"killed": "SIGKILL", "after_sigterm_s": grace}``."""
        gone_at = (
            {p.name: p.gone_at_ns for p in self.clock.registry.processes()} if self.virtual else {}
        )
        out: dict[str, dict[str, object]] = {}
        with self._lock:
            for proc in self.processes:
                if proc.name in self._finished:
                    at = gone_at.get(proc.name)
                    out[proc.name] = {
                        "exit": proc.returncode,
                        "at_s": None if at is None else at / 1e9,
                    }
            for name, grace_s in self._killed.items():
                out[name] = {"killed": "SIGKILL", "after_sigterm_s": grace_s}
        return out

    def _finished_ok(self, proc: SchedulerProcess) -> bool:
        """Exit 0 of a process that joined the clock, with ``zero_exit_continues``: that
        process is done (a one-shot tool, a --once mode), the run goes on."""
        if not self.zero_exit_continues or proc.returncode != 0:
            return False
        if self.virtual and not self.clock.registry.joined(proc.name):
            return False  # it never ran in virtual time: that is a failure to report
        self._finished.add(proc.name)
        return True

    def _say_killed(self, proc: SchedulerProcess, grace_s: float) -> None:
        with self._lock:
            self._killed[proc.name] = grace_s
        print(
            f"timewarp: scheduler {proc.name!r} ({shlex.join(proc.command)}) was still "
            f"running {grace_s:g} s (wall time) after the SIGTERM that ends the run: killed "
            f"(SIGKILL); what it does on SIGTERM (its last log lines) is missing from "
            f"{proc.log_path}",
            file=sys.stderr,
            flush=True,
        )

    def check(self) -> None:
        """Raise SchedulerFailed if a scheduler ended before the simulation did (exit 0
        ends only that process, unless ``zero_exit_continues`` is off)."""
        if self._finishing:
            return
        # A process gone from the clock ended at that virtual instant: the run stops there,
        # whatever the wall clock says. Give it a moment to end, so that the report carries
        # its exit code; one that said bye is ending even if its interpreter takes longer.
        # (A connection that dropped without a bye from a process still running is an
        # exec: the program goes on under the same name, "#2".)
        gone = {p.name: p.said_bye for p in self.clock.registry.processes() if p.gone}
        exiting = []
        for proc in self.processes:
            if proc.name in gone and proc.returncode is None and proc.popen is not None:
                try:
                    # (time stands still meanwhile: waiting longer costs only wall time)
                    code = proc.popen.wait(EXIT_WAIT_S if gone[proc.name] else 5)
                except subprocess.TimeoutExpired:
                    if gone[proc.name]:
                        exiting.append(proc)
                    continue
                with self._lock:
                    proc.returncode = code
        if self.zero_exit_continues:
            exiting = []  # said bye, still winding down: judged by its exit code when it comes
        if exiting and not any(p.returncode is not None for p in self.processes):
            proc = exiting[0]
            raise SchedulerFailed(
                f"scheduler {proc.name!r} ({shlex.join(proc.command)}) ended its last "
                "non-daemon thread before the simulation ended (its interpreter is still "
                f"winding down); last lines of {proc.log_path}:\n{proc.log_tail()}"
            )
        with self._lock:
            if self._unjoined:
                raise SchedulerFailed(next(iter(self._unjoined.values())))
            dead = [
                p
                for p in self.processes
                if p.returncode is not None and p.name not in self._finished
            ]
        dead = [p for p in dead if not self._finished_ok(p)]
        if dead:
            proc = dead[0]
            how = (
                f"was killed by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"exited with code {proc.returncode}"
            )
            if self.virtual and not self.clock.registry.joined(proc.name):
                how += (
                    " without ever joining the virtual clock (likely cause: "
                    f"{unjoined_cause(proc.command)})"
                )
            raise SchedulerFailed(
                f"scheduler {proc.name!r} ({shlex.join(proc.command)}) {how} before the simulation "
                f"ended; last lines of {proc.log_path}:\n{proc.log_tail()}"
            )

    def stop_all(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM to every process group, SIGKILL after ``grace_s`` of wall time for what
        is still there. The grace is generous: what a program writes on SIGTERM (its last
        log line) is part of its log's bytes, and on a loaded machine a one-second grace
        killed programs half-way through it, so two runs' logs differed. A kill is said
        (stderr, and :meth:`exits` for the manifest): a log that lacks its last lines in
        one run of two then names its cause."""
        self._finishing = True
        for proc in self.processes:
            if proc.popen is not None and proc.popen.poll() is None:
                try:
                    os.killpg(proc.popen.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self.processes:
            if proc.popen is None:
                continue
            try:
                proc.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                if proc.popen.wait() == -signal.SIGKILL:
                    self._say_killed(proc, grace_s)
        # what left the process groups (setsid, a daemon's double fork): found by its tag
        proctree.terminate_tagged(self.run_tag, grace_s)
        if self._tmp_root is not None:
            shutil.rmtree(self._tmp_root, ignore_errors=True)


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish"})


def unjoined_cause(argv: Sequence[str]) -> str:
    """Why a process launched under the clock did not join it, judged from its command."""
    boot = launch.BOOT_DIR
    generic = (
        f"its Python interpreter did not run timewarp's start-up hook ({boot}/sitecustomize.py, "
        "put first on PYTHONPATH by the launcher)"
    )
    program = os.path.basename(argv[0]) if argv else ""
    flags = [a for a in argv[1:3] if a.startswith("-") and not a.startswith("--")]
    if program.startswith("python") and any(set(f[1:]) & set("EIS") for f in flags):
        return (
            f"{generic}: `{program} {' '.join(flags)}` ignores PYTHONPATH or site "
            "initialisation (-E, -I, -S); drop that flag"
        )
    if program in _SHELLS:
        return (
            f"{generic}: the shell command or script probably replaces PYTHONPATH (write "
            "`PYTHONPATH=$PYTHONPATH:deps`, or give the command as `env PYTHONPATH=deps "
            "python prog.py`, which timewarp composes with its own), or runs another "
            "interpreter in which timewarp is not installed"
        )
    return (
        f"{generic}: something between the launcher and the interpreter replaced "
        "PYTHONPATH (a wrapper script or tool), or the program is not a Python process"
    )
