"""Scheduler processes: started under ``timewarp run``, each with its own token and
kubeconfig, watched until the end.

A scheduler that exits (whatever its code) before the simulation ended is a failure:
:meth:`Launcher.check` raises :class:`SchedulerFailed` naming it, with its exit code and
the end of its log. At the end every process group is terminated (then killed), and so is
every process that left its group (``setsid``, a daemon's double fork): each carries the
run's tag in its environment (:mod:`broker.proctree`), so no orphan survives the run.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from broker import proctree
from broker.clock_service import ClockService
from broker.facade.endpoint import Endpoint
from patcher import launch
from timewarp.wire import clockproto

if TYPE_CHECKING:
    from broker.facade import Facade


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
    ) -> None:
        self.clock = clock
        self.facade = facade
        self.out_dir = out_dir
        self.patch_modules = list(patch_modules)
        self.freeze_unpatched = freeze_unpatched
        self.incluster_dir = incluster_dir
        self.extra_kubeconfig = extra_kubeconfig
        self.virtual = virtual
        self.processes: list[SchedulerProcess] = []
        # every process the schedulers start carries it, whatever session it moves to
        self.run_tag = proctree.new_tag()
        self._finishing = False
        self._lock = threading.Lock()

    def start(
        self, command: str | Sequence[str], *, name: str | None = None, cwd: str | None = None
    ) -> SchedulerProcess:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("empty scheduler command")
        name = name or f"scheduler-{len(self.processes)}"
        token = self.facade.add_token(name)
        kubeconfig = self.out_dir / f"{name}.kubeconfig"
        self.facade.write_kubeconfig(kubeconfig, name)
        if self.extra_kubeconfig is not None and not self.processes:
            self.facade.write_kubeconfig(self.extra_kubeconfig, name)
        env = dict(os.environ)
        env["KUBECONFIG"] = str(kubeconfig)
        env["PYTHONUNBUFFERED"] = "1"
        env[proctree.TAG_ENV] = self.run_tag
        if self.incluster_dir is not None:
            env.update(self.facade.write_incluster(self.incluster_dir / name, name))
        wrapped = argv
        if self.virtual:
            env[clockproto.ENV_ENDPOINT] = self.clock.endpoint
            env[clockproto.ENV_NAME] = name
            env[clockproto.ENV_BROKER_PID] = str(os.getpid())
            env[clockproto.ENV_FACADE] = f"{self.facade.host}:{self.facade.port}"
            # what `timewarp run --name NAME -- CMD` would exec, without its interpreter
            # start-up on the way (the scheduler's start-up is on the critical path)
            launch.runtime_environment(
                env, patch_modules=self.patch_modules, freeze_unpatched=self.freeze_unpatched
            )
            wrapped = launch.resolve_command(argv)
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

    def _reap(self, proc: SchedulerProcess) -> None:
        assert proc.popen is not None
        code = proc.popen.wait()
        with self._lock:
            proc.returncode = code
        if self.virtual:
            self.clock.process_gone(proc.name, code)

    def check(self) -> None:
        """Raise SchedulerFailed if a scheduler ended before the simulation did."""
        if self._finishing:
            return
        # A process that said goodbye to the clock is exiting: give it a moment to end,
        # so that the report carries its exit code.
        said_bye = {p.name for p in self.clock.processes() if p.gone}
        for proc in self.processes:
            if proc.name in said_bye and proc.returncode is None and proc.popen is not None:
                try:
                    code = proc.popen.wait(5)
                except subprocess.TimeoutExpired:
                    continue
                with self._lock:
                    proc.returncode = code
        with self._lock:
            dead = [p for p in self.processes if p.returncode is not None]
        if dead:
            proc = dead[0]
            how = (
                f"was killed by signal {-proc.returncode}"
                if proc.returncode < 0
                else f"exited with code {proc.returncode}"
            )
            raise SchedulerFailed(
                f"scheduler {proc.name!r} ({shlex.join(proc.command)}) {how} before the simulation "
                f"ended; last lines of {proc.log_path}:\n{proc.log_tail()}"
            )

    def stop_all(self, grace_s: float = 1.0) -> None:
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
                proc.popen.wait()
        # what left the process groups (setsid, a daemon's double fork): found by its tag
        proctree.terminate_tagged(self.run_tag, grace_s)
