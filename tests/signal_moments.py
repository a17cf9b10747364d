"""A stop signal at a chosen moment of a real command, and what must hold afterwards.

The promise (``commands/stopping.py``, docs/user-guide.md "Exit status"): the first
SIGINT, SIGTERM or SIGHUP, whenever it comes, ends the command cleanly — exit status
128 + the signal and an "interrupted" message (never "a bug in timewarp" or a
traceback), ``manifest.json`` written with ``ok: false`` and every CSV whole, no process
of the run left alive, no temporary folder left behind. A signal that comes once the
run's verdict is made may instead let it end as it would have (exit 0, ``ok: true``):
either way the exit status and the manifest agree.

A :class:`Moment` names the command, the signal and the phase: ``startup`` (a delay
after the command starts: imports, input checks, wiring), ``run`` (after the scheduler
or program said it runs) or ``cleanup`` (after the simulation's outputs exist: the
take-down, the report); ``simulate-check`` (``simulate --check-determinism``) also has
``second`` (as its second run begins), its ``run`` is the first run's and its ``cleanup``
the second's (the comparison), and no ``OUT/.determinism-check`` may be left. Phases are reached by waiting on output markers; within a phase
the signal comes after ``delay_s`` (seeded by the caller). :func:`check_moment` runs one
and returns what went wrong (empty: all held). Used by ``tests/test_signal_moments.py``
(a few fixed moments in the default suite, many seeded ones under ``-m slow``) and by
``scripts/signal_stress.py``.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from simulator.testing import write_platform, write_workload

ROOT = Path(__file__).resolve().parent.parent
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
COMMANDS = (
    "simulate", "simulate-batsim", "broker", "sim", "run", "patch", "sweep",
    "simulate-check",
)  # fmt: skip
PHASES = ("startup", "run", "cleanup")
MARKER_ENV = "SIGNAL_MOMENT_RUN"  # every process of the run inherits it: orphans are found
POLLER = "python tests/programs/polling_scheduler.py --interval 5"
# a run of ~20 scheduling cycles that ends by itself: the clean-up phase is reachable
JOBS = [{"id": str(i), "subtime": 15 * i, "res": 1, "profile": "short"} for i in range(8)]
PROFILES = {"short": {"type": "delay", "delay": 10, "cpu": "1", "scheduler": "default-scheduler"}}
PROGRAM = """import sys, time
print("started", flush=True)
try:
    for i in range(30):
        time.sleep(1)
except KeyboardInterrupt:  # the SIGINT passed on: the program's own traceback is not ours
    sys.exit(130)
print("done", flush=True)
"""
# the longest a phase's marker may take to show (a loaded machine: generous, never hit)
MARKER_WAIT_S = 180.0
END_WAIT_S = 180.0  # a signalled command's end


@dataclass(frozen=True)
class Moment:
    command: str
    signum: int
    phase: str
    delay_s: float = 0.0

    def __str__(self) -> str:
        name = signal.Signals(self.signum).name
        return f"{self.command}/{name}/{self.phase}+{self.delay_s * 1000:.0f}ms"


@dataclass
class Outcome:
    moment: Moment
    returncode: int | None = None
    interrupted: bool = False  # ended as interrupted (else: it had ended its work first)
    killed_exiting: bool = False  # by the signal, in the interpreter's last milliseconds
    problems: list[str] = field(default_factory=list)
    stderr: str = ""


def moments(seed: int, count: int, commands: tuple[str, ...] = COMMANDS) -> list[Moment]:
    """``count`` moments spread over the commands, signals and phases, delays seeded."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        command = commands[i % len(commands)]
        phase = PHASES[(i // len(commands)) % len(PHASES)]
        if command == "patch":
            phase = "startup"  # no marker: the whole command is one phase
        signum = SIGNALS[(i // (len(commands) * len(PHASES))) % len(SIGNALS)]
        spread = {"startup": 2.5, "run": 0.8, "cleanup": 1.2}[phase]
        if command == "patch":
            spread = 6.0
        out.append(Moment(command, signum, phase, round(rng.uniform(0, spread), 3)))
    return out


def batsim_path() -> str | None:
    path = os.environ.get("TIMEWARP_BATSIM") or "/work/shared/tools/batsim-4.2.1/bin/batsim"
    return path if Path(path).is_file() else None


# ------------------------------------------------------------------------------ running
class _Pause:
    """A bounded wait for a file-system marker of another process (nothing else to wait
    on): re-checked every 20 ms, never past ``limit``."""

    def __init__(self) -> None:
        self._never = threading.Event()

    def until(self, predicate, what: str, limit: float = MARKER_WAIT_S) -> bool:
        deadline = time.monotonic() + limit
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            self._never.wait(0.02)
        return True

    def delay(self, seconds: float) -> None:
        self._never.wait(seconds)  # the seeded moment within the phase


def _contains(path: Path, text: str):
    return lambda: path.exists() and text in path.read_text(errors="replace")


_WAITING = re.compile(r"waiting for the simulator on tcp://127\.0\.0\.1:(\d+);")


def _broker_port(log: Path) -> int | None:
    """The port a broker started with ``-s tcp://127.0.0.1:0`` chose, once it said it (a
    port picked free here and bound by the broker later could be taken in between)."""
    found = _WAITING.search(log.read_text(errors="replace")) if log.exists() else None
    return int(found.group(1)) if found else None


def _spawn(argv: list[str], env: dict, log: Path, stdout: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "timewarp", *argv],
        cwd=ROOT,
        env=env,
        stdout=open(stdout, "w") if stdout else subprocess.DEVNULL,  # noqa: SIM115
        stderr=open(log, "w"),  # noqa: SIM115 — the child holds it; closed with the process
        start_new_session=True,  # the signal goes to the command alone, as `kill PID`
    )


def check_moment(moment: Moment, work: Path, base_env: dict) -> Outcome:
    """Run the command of ``moment`` in ``work`` (fresh), signal it, check the promise."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    tmp = work / "tmp"
    tmp.mkdir()
    env = {**base_env, "TMPDIR": str(tmp), MARKER_ENV: str(work)}
    env.setdefault("PYTHONPATH", str(ROOT))
    outcome = Outcome(moment)
    pause = _Pause()
    platform = write_platform(work / "p.xml", 2, 1)
    workload = write_workload(work / "w.json", JOBS, PROFILES)
    out = work / "out"
    others: list[subprocess.Popen] = []  # a second command the moment's needs (sim/broker)
    proc = None
    try:
        proc = _start(moment, work, env, platform, workload, out, others, pause)
        if proc is None:
            outcome.problems.append("skipped: real Batsim not found")
            return outcome
        os.kill(proc.pid, moment.signum)
        try:
            proc.wait(END_WAIT_S)
        except subprocess.TimeoutExpired:
            outcome.problems.append(f"still running {END_WAIT_S:g} s after the signal")
        for other in others:  # the peer: a simulator waits for its broker as Batsim
            # does, forever
            # (the broker, too, waits for a simulator that never came): ended as a user would
            if other.poll() is None:
                os.kill(other.pid, signal.SIGTERM)
            try:
                code = other.wait(END_WAIT_S)
            except subprocess.TimeoutExpired:
                outcome.problems.append(f"its peer {other.args[3]} still running")
                continue
            if code not in (0, 1, 128 + signal.SIGTERM, -signal.SIGTERM):  # (-: in its start-up)
                outcome.problems.append(f"its peer {other.args[3]} exit {code}")
    except TimeoutError as exc:
        outcome.problems.append(str(exc))
    finally:
        for p in [proc, *others]:
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    outcome.returncode = proc.returncode if proc is not None else None
    log = work / "stderr.log"  # (none if a marker never came before it started)
    outcome.stderr = log.read_text(errors="replace") if log.exists() else ""
    _judge(outcome, work, out)
    _judge_leftovers(outcome, work, tmp)
    return outcome


def _start(moment, work, env, platform, workload, out, others, pause):  # type: ignore[no-untyped-def]
    """Start the command and return it once the moment's phase is reached."""
    cmd, phase = moment.command, moment.phase
    log = work / "stderr.log"
    sched_log = out / "scheduler-0.log"
    if cmd in ("simulate", "simulate-batsim"):
        extra = []
        if cmd == "simulate-batsim":
            batsim = batsim_path()
            if batsim is None:
                return None
            extra = ["--batsim", batsim]
        argv = ["simulate", "--no-plots", "--scheduler", POLLER, "-p", str(platform),
                "-w", str(workload), "-o", str(out), *extra]  # fmt: skip
        proc = _spawn(argv, env, log)
        _reach(pause, phase, moment.delay_s, sched_log, out / "out_jobs.csv")
        return proc
    if cmd == "simulate-check":
        argv = ["simulate", "--no-plots", "--check-determinism", "--scheduler", POLLER,
                "-p", str(platform), "-w", str(workload), "-o", str(out)]  # fmt: skip
        proc = _spawn(argv, env, log)
        if phase == "second":  # the first run is over: the second begins (or is about to)
            pause.until(_contains(log, "determinism check: second run"), "the second run")
            pause.delay(moment.delay_s)
            return proc
        first_log = out / ".determinism-check" / "scheduler-0.log"
        _reach(pause, phase, moment.delay_s, first_log, out / "out_jobs.csv")
        return proc
    if cmd == "run":
        prog = work / "prog.py"
        prog.write_text(PROGRAM)
        stdout = work / "stdout.log"
        proc = _spawn(["run", "--standalone", "-q", "--", "python", str(prog)], env, log, stdout)
        if phase == "startup":
            pause.delay(moment.delay_s)
        else:
            pause.until(_contains(stdout, "started" if phase == "run" else "done"), phase)
            pause.delay(moment.delay_s)
        return proc
    if cmd in ("broker", "sim"):
        broker_argv = ["broker", "-o", str(out), "-s", "tcp://127.0.0.1:0",
                       "--scheduler", POLLER]  # fmt: skip

        def sim_argv(port: int) -> list[str]:
            return ["sim", "-q", "-p", str(platform), "-w", str(workload), "-e",
                    str(out / "out"), "--enable-compute-sharing", "--enable-dynamic-jobs",
                    "-s", f"tcp://127.0.0.1:{port}"]  # fmt: skip

        peer_log = work / "peer.log"
        if cmd == "broker":
            proc = _spawn(broker_argv, env, log)
            if phase == "startup":
                pause.delay(moment.delay_s)
                port = _broker_port(log)
                if port is not None:  # (not yet waiting: no simulator needed, it ends first)
                    others.append(_spawn(sim_argv(port), env, peer_log))
                return proc
            pause.until(lambda: _broker_port(log) is not None, "the broker")
            others.append(_spawn(sim_argv(_broker_port(log)), env, peer_log))
        else:
            others.append(_spawn(broker_argv, env, peer_log))
            pause.until(lambda: _broker_port(peer_log) is not None, "the broker")
            proc = _spawn(sim_argv(_broker_port(peer_log)), env, log)
            if phase == "startup":
                pause.delay(moment.delay_s)
                return proc
        _reach(pause, phase, moment.delay_s, sched_log, out / "out_jobs.csv")
        return proc
    if cmd == "patch":
        src = work / "src"
        shutil.copytree(
            ROOT / "sample_schedulers", src, ignore=shutil.ignore_patterns("__pycache__")
        )
        proc = _spawn(["patch", str(src), "-o", str(out)], env, log)
        pause.delay(moment.delay_s)
        return proc
    if cmd == "sweep":
        import yaml

        spec = work / "sweep.yaml"
        spec.write_text(yaml.safe_dump({
            "root": str(ROOT), "timeout": 600, "schedulers": {"poller": POLLER},
            "platforms": {"p": str(platform)}, "workloads": {"w": str(workload)},
            "modes": {"deterministic": {}},
        }))  # fmt: skip
        proc = _spawn([ "sweep", str(spec), "-o", str(out), "--workers", "1", "--no-plots"],
                      env, log)  # fmt: skip
        if phase == "startup":
            pause.delay(moment.delay_s)
            return proc

        def logs_say(text: str):
            def said() -> bool:
                return any(
                    text in p.read_text(errors="replace")
                    for p in out.glob("runs/*/scheduler-0.log")
                )

            return said

        if phase == "run":
            pause.until(logs_say("cycle 1:"), "the sweep's run")
        else:
            pause.until(lambda: any(out.glob("runs/*/out_jobs.csv")), "the sweep's run's end")
        pause.delay(moment.delay_s)
        return proc
    raise ValueError(f"unknown command {cmd!r}")


def _reach(pause: _Pause, phase: str, delay: float, sched_log: Path, ended: Path) -> None:
    if phase == "run":
        pause.until(_contains(sched_log, "cycle 1:"), "the scheduler's first cycle")
    elif phase == "cleanup":
        pause.until(ended.exists, "the simulation's outputs")
    pause.delay(delay)


# ------------------------------------------------------------------------------ judging
INTERRUPTED = "interrupted by {name}"  # what `timewarp` says of a signal before the command ran
MESSAGES = {  # what the command says when a stop signal ended its work
    "simulate": INTERRUPTED,
    "simulate-batsim": INTERRUPTED,
    "simulate-check": INTERRUPTED,
    "broker": INTERRUPTED,
    "sim": "timewarp sim: {name}: ",
    "run": INTERRUPTED,
    "patch": "stopped by {name}",
    "sweep": "interrupted",
}


def _judge(outcome: Outcome, work: Path, out: Path) -> None:
    m, code, err = outcome.moment, outcome.returncode, outcome.stderr
    problems = outcome.problems
    name = signal.Signals(m.signum).name
    if code is None:
        return
    before_timewarp = code == -m.signum or (
        m.signum == signal.SIGINT and code == 1 and "KeyboardInterrupt" in err
    )
    if before_timewarp and _nothing_made(m.command, work, out):
        # before timewarp installed its handlers (the interpreter's start-up and the
        # first imports, ~0.1 s): the default action — SIGINT's KeyboardInterrupt —
        # with nothing made yet, as for any program
        outcome.interrupted = True
        return
    if code == -m.signum and _work_done(m.command, work, out):
        # everything written and the command returned: the interpreter's finalization
        # puts the default actions back (CPython's signal module does) for its last
        # milliseconds, and a signal then ends the process as it would any program
        outcome.killed_exiting = True
        _judge_csvs(outcome, out)
        return
    if code < 0:
        problems.append(f"killed by {signal.Signals(-code).name} (no clean-up ran)")
    elif code == 128 + m.signum:
        outcome.interrupted = True
        said = [MESSAGES[m.command].format(name=name), INTERRUPTED.format(name=name)]
        if not any(text in err for text in said):
            problems.append(f"exit {code} without saying {said[0]!r}")
    elif code != 0:
        problems.append(f"exit {code}, not {128 + m.signum} (nor 0 for a run that had ended)")
    tracebacks = err.split("Traceback (most recent call last)")[1:]
    if m.command == "run":  # the program's own KeyboardInterrupt (the SIGINT passed on in
        # its start-up, before its try) is the program's, not timewarp's
        tracebacks = [t for t in tracebacks if "\nKeyboardInterrupt" not in t]
    if tracebacks:
        problems.append("stderr has a traceback")
    for bad in ("bug in timewarp", "internal error"):
        if bad in err:
            problems.append(f"stderr says {bad!r}")
    for path in [work / "peer.log"]:
        if path.exists() and "Traceback (most recent call last)" in path.read_text(
            errors="replace"
        ):
            problems.append(f"{path.name} has a traceback")
    if m.command in ("simulate", "simulate-batsim", "broker", "sim", "simulate-check"):
        _judge_run_outputs(outcome, out)
    if (out / ".determinism-check").exists():  # scratch: removed or renamed, never left
        problems.append("OUT/.determinism-check left")
    elif m.command == "patch":
        _judge_patch(outcome, work, out)
    elif m.command == "sweep":
        _judge_csvs(outcome, out)


def _work_done(command: str, work: Path, out: Path) -> bool:
    if command in ("simulate", "simulate-batsim", "broker", "simulate-check"):
        try:
            return json.loads((out / "manifest.json").read_text())["ok"] is True
        except (OSError, ValueError, KeyError):
            return False
    if command == "sim":
        return (out / "out_jobs.csv").exists() and not list(out.glob("*.tmp"))
    if command == "run":
        stdout = work / "stdout.log"
        return stdout.exists() and "done" in stdout.read_text()
    if command == "patch":
        return out.is_dir() and any(out.iterdir())
    if command == "sweep":
        return (out / "summary.csv").exists()
    return False


def _nothing_made(command: str, work: Path, out: Path) -> bool:
    if command == "sim":  # (the folder is its broker's: only its own outputs count, not
        # the broker's out_decisions.csv, there from its start)
        own = ("out_jobs.csv*", "out_schedule.csv*", "out_machine_states.csv*")
        return not any(list(out.glob(pattern)) for pattern in own)
    made = out.exists() and any(out.iterdir())
    return not made and not any((work / "tmp").iterdir()) and not _processes_of(work)


def _judge_run_outputs(outcome: Outcome, out: Path) -> None:
    problems = outcome.problems
    manifest_path = out / "manifest.json"
    csvs = sorted(out.rglob("*.csv")) if out.exists() else []
    if not manifest_path.exists():
        if csvs:
            problems.append(f"CSVs without a manifest: {[p.name for p in csvs]}")
        if outcome.returncode == 0:
            problems.append("exit 0 without a manifest")
    else:
        try:
            manifest = json.loads(manifest_path.read_text())
        except ValueError as exc:
            problems.append(f"manifest.json unreadable: {exc}")
            manifest = None
        if manifest is not None:
            ok = manifest.get("ok")
            if outcome.moment.command == "sim":
                pass  # the broker's manifest: its own verdict (the simulator went away)
            elif outcome.interrupted and ok is not False:
                problems.append(f"interrupted, yet manifest ok={ok!r}")
            elif outcome.returncode == 0 and ok is not True:
                problems.append(f"exit 0, yet manifest ok={ok!r}")
            if outcome.interrupted and outcome.moment.command != "sim":
                reason = manifest.get("reason", "")
                if "interrupted by" not in reason and not reason:
                    problems.append(f"manifest reason {reason!r}")
    _judge_csvs(outcome, out)


def _judge_csvs(outcome: Outcome, out: Path) -> None:
    if not out.exists():
        return
    for path in sorted(out.rglob("*")):
        if path.name.endswith(".tmp") or ".tmp." in path.name:
            outcome.problems.append(f"temporary file left: {path.relative_to(out)}")
        if path.suffix != ".csv" or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if text and not text.endswith("\n"):
            outcome.problems.append(f"{path.name}: last line cut")
            continue
        rows = list(csv.reader(text.splitlines()))
        if rows and any(len(r) != len(rows[0]) for r in rows[1:]):
            outcome.problems.append(f"{path.name}: a row of the wrong width")


def _judge_patch(outcome: Outcome, work: Path, out: Path) -> None:
    leftovers = [p.name for p in work.iterdir() if p.name.startswith(".") or "staging" in p.name]
    if leftovers:
        outcome.problems.append(f"staging left: {leftovers}")
    if outcome.interrupted and out.exists():
        outcome.problems.append("-o made although interrupted")
    if outcome.returncode == 0 and not out.exists():
        outcome.problems.append("exit 0 without -o")


def _judge_leftovers(outcome: Outcome, work: Path, tmp: Path) -> None:
    """No process of the run alive (bounded wait for each to exit), no temporary folder."""
    pids = _processes_of(work)
    fds = []
    for pid in pids:
        try:
            fds.append((pid, os.pidfd_open(pid)))
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + 20
    pending = dict(fds)
    while pending and time.monotonic() < deadline:
        done, _, _ = select.select(list(pending.values()), [], [], 1.0)
        pending = {p: fd for p, fd in pending.items() if fd not in done}
    for _pid, fd in fds:
        os.close(fd)
    if pending:
        names = [_cmdline(p) for p in pending]
        outcome.problems.append(f"orphan processes: {names}")
        for pid in pending:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    left = sorted(p.name for p in tmp.iterdir()) if tmp.exists() else []
    if left:
        outcome.problems.append(f"temporary folders left: {left}")


def _processes_of(work: Path) -> list[int]:
    tag = f"{MARKER_ENV}={work}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        if (
            b"\0" + tag + b"\0" in b"\0" + environ + b"\0"
            and stat[stat.rfind(b")") + 2 :][:1] != b"Z"
        ):
            found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return str(pid)
