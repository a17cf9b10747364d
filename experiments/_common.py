"""What every experiment script shares: running ``timewarp simulate``, sampling the CPU
time of its processes, reading Batsim CSVs, and small statistics.

A run is one ``timewarp simulate`` child process. Its wall time is measured here, around
the whole process (Python start-up, simulator, broker, scheduler, CSVs; plots are
skipped), so it is what a user waits for. While it runs, a sampler thread reads
``/proc/PID/stat`` of the process tree every ``SAMPLE_S`` seconds: the last sample of each
process is its CPU time (user + system) within one sampling period of the truth, which
attributes the run's time to the broker (the ``simulate`` process itself), the simulator
and the scheduler(s). Linux only (``/proc``); elsewhere CPU times are ``None``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _data_dir() -> Path:
    """``$TIMEWARP_DATA``, else ``shared/data`` beside the checkout (or beside its parent,
    for a worktree under ``wt/``)."""
    if os.environ.get("TIMEWARP_DATA"):
        return Path(os.environ["TIMEWARP_DATA"])
    candidates = [REPO.parent / "shared/data", REPO.parent.parent / "shared/data"]
    return next((c for c in candidates if c.is_dir()), candidates[0])


DATA = _data_dir()
BATKUBE = DATA / "batkube"
REFERENCE = DATA / "batsim-reference"

DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"
SAMPLE_S = 0.05
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class Run:
    """One finished ``timewarp simulate``: its figures, wall time and CPU attribution."""

    out: Path
    returncode: int
    wall_s: float
    figures: dict = field(default_factory=dict)
    manifest: dict = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)  # role -> CPU seconds (sampled)
    cpu_total_s: float = math.nan  # every process of the run, exact (rusage of children)
    stderr: str = ""
    # with run_simulate(detail=True): role -> OS thread name -> CPU seconds (sampled), and
    # role -> peak resident set in KiB (VmHWM at the last sample; the largest if several)
    thread_cpu_s: dict[str, dict[str, float]] = field(default_factory=dict)
    peak_rss_kib: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and bool(self.manifest.get("ok"))

    @property
    def jobs_csv(self) -> Path:
        return self.out / "out_jobs.csv"

    def jobs_digest(self) -> str:
        """sha256 of ``out_jobs.csv``: equal digests mean byte-identical results."""
        return hashlib.sha256(self.jobs_csv.read_bytes()).hexdigest()

    def figure(self, key: str) -> float:
        return float(self.figures.get(key, math.nan))


def unwrapped_command(command: str) -> str:
    """A scheduler command for ``--mode realtime``, where nothing wraps it in ``timewarp
    run``: a leading ``python``/``python3`` becomes this interpreter (the one with the
    kubernetes client), since the ``python`` on ``PATH`` may be another."""
    argv = shlex.split(command)
    if argv and argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    return shlex.join(argv)


def simulate_command(
    schedulers: Sequence[str],
    platform: Path | str,
    workloads: Sequence[Path | str],
    out: Path | str,
    extra: Sequence[str] = (),
) -> list[str]:
    """The argv of a quiet, plot-less ``timewarp simulate`` run."""
    cmd = [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots"]
    for sched in schedulers:
        cmd += ["--scheduler", sched]
    cmd += ["-p", str(platform)]
    for w in workloads:
        cmd += ["-w", str(w)]
    cmd += ["-o", str(out), *extra]
    return cmd


def run_simulate(
    schedulers: Sequence[str],
    platform: Path | str,
    workloads: Sequence[Path | str],
    out: Path | str,
    extra: Sequence[str] = (),
    timeout_s: float | None = None,
    detail: bool = False,
) -> Run:
    """Run ``timewarp simulate`` to completion (or ``timeout_s``) and collect its figures.

    ``detail`` also samples each process's threads and peak RSS (``Run.thread_cpu_s``,
    ``Run.peak_rss_kib``), at a few more ``/proc`` reads per sample.

    Not thread-safe: ``cpu_total_s`` is this process's children's rusage delta, so runs
    must not overlap.

    A run that times out is interrupted (SIGINT to its process group, SIGKILL 30 s later)
    and returned with ``returncode`` -9; whatever it wrote stays in ``out``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = simulate_command(schedulers, platform, workloads, out, extra)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    sampler = CpuSampler(proc.pid, detail=detail)
    sampler.start()
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        # Ctrl-C first: simulate stops its children and keeps what was written
        os.killpg(proc.pid, signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, stderr = proc.communicate()
        code = -9
        stderr = (stderr or b"") + f"\n(stopped after {timeout_s} s)".encode()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler.stop()
    manifest = {}
    if (out / "manifest.json").exists():
        manifest = json.loads((out / "manifest.json").read_text())
    return Run(
        out=out,
        returncode=code,
        wall_s=wall,
        figures=manifest.get("figures", {}),
        manifest=manifest,
        cpu_s=sampler.by_role(),
        thread_cpu_s=sampler.by_thread(),
        peak_rss_kib=sampler.peak_rss(),
        cpu_total_s=(after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        stderr=stderr.decode(errors="replace"),
    )


def _proc_stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a live process, from ``/proc/PID/stat``."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    rest = raw[raw.rindex(")") + 2 :].split()
    return int(rest[1]), (int(rest[11]) + int(rest[12])) / _TICKS


def _task_stats(pid: int) -> dict[int, tuple[str, float]]:
    """tid -> (OS thread name, CPU seconds) of each live thread of a process."""
    stats = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return stats
    for tid in tids:
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # ended between the listing and the read
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        rest = raw[raw.rindex(")") + 2 :].split()
        stats[int(tid)] = (name, (int(rest[11]) + int(rest[12])) / _TICKS)
    return stats


def _peak_rss_kib(pid: int) -> int | None:
    """``VmHWM`` of a live process: its peak resident set so far, in KiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def role_of(argv: Sequence[str]) -> str:
    """Which part of a simulation a process is, from its command line."""
    joined = " ".join(argv)
    if "timewarp simulate" in joined:
        return "broker"
    if " timewarp sim " in f" {joined} " or "batsim" in joined:
        return "simulator"
    if "timewarp run" in joined or "sample_schedulers" in joined:
        return "scheduler"
    return "other"


class CpuSampler(threading.Thread):
    """Polls the CPU time of a process and all its descendants until stopped.

    Known processes are read every ``period_s``; the whole of ``/proc`` is scanned for
    new descendants only every ``RESCAN_EVERY`` periods (a scan costs a few ms of CPU,
    which would otherwise be charged to the run being measured).
    """

    RESCAN_EVERY = 10

    def __init__(self, root: int, period_s: float = SAMPLE_S, detail: bool = False) -> None:
        super().__init__(daemon=True, name=f"cpu-sampler-{root}")
        self.root = root
        self.period_s = period_s
        self.detail = detail
        self.seen: dict[int, tuple[str, float]] = {}  # pid -> (role, last CPU seconds)
        self.threads: dict[tuple[int, int], tuple[str, float]] = {}  # (pid, tid) -> (name, CPU)
        self.hwm: dict[int, int] = {}  # pid -> peak RSS KiB
        self._stop_event = threading.Event()
        self.available = Path("/proc/self/stat").exists()

    def run(self) -> None:
        tick = 0
        while self.available and not self._stop_event.is_set():
            if tick % self.RESCAN_EVERY == 0 or tick < 5:
                self._scan()
            else:
                self._refresh()
            tick += 1
            self._stop_event.wait(self.period_s)

    def _refresh(self) -> None:
        for pid in list(self.seen):
            stat = _proc_stat(pid)
            if stat is not None:
                self._record(pid, stat[1])

    def _record(self, pid: int, cpu: float) -> None:
        # re-read the role each time: between fork and exec a child shows its parent's argv
        argv = _cmdline(pid)
        role = role_of(argv) if argv and argv != [""] else self.seen.get(pid, ("other",))[0]
        self.seen[pid] = (role, cpu)
        if self.detail:
            for tid, named in _task_stats(pid).items():
                self.threads[(pid, tid)] = named
            hwm = _peak_rss_kib(pid)
            if hwm is not None:
                self.hwm[pid] = hwm

    def _scan(self) -> None:
        parents: dict[int, tuple[int, float]] = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                stat = _proc_stat(int(entry.name))
                if stat is not None:
                    parents[int(entry.name)] = stat
        tree = {self.root}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, _) in parents.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree:
            if pid in parents:
                self._record(pid, parents[pid][1])

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=2)

    def by_role(self) -> dict[str, float]:
        if not self.available:
            return {}
        totals: dict[str, float] = {}
        for role, cpu in self.seen.values():
            totals[role] = round(totals.get(role, 0.0) + cpu, 3)
        return totals

    def by_thread(self) -> dict[str, dict[str, float]]:
        """role -> OS thread name -> CPU seconds (threads of one name summed)."""
        totals: dict[str, dict[str, float]] = {}
        for (pid, _), (name, cpu) in self.threads.items():
            role = self.seen.get(pid, ("other",))[0]
            names = totals.setdefault(role, {})
            names[name] = round(names.get(name, 0.0) + cpu, 3)
        return totals

    def peak_rss(self) -> dict[str, int]:
        """role -> the largest peak RSS (KiB) of its processes."""
        peaks: dict[str, int] = {}
        for pid, kib in self.hwm.items():
            role = self.seen.get(pid, ("other",))[0]
            peaks[role] = max(peaks.get(role, 0), kib)
        return peaks


# ----------------------------------------------------------------------------- CSVs
def read_rows(path: Path | str) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def jobs_figures(path: Path | str) -> tuple[float, float]:
    """(makespan, mean waiting time) of a Batsim ``jobs.csv``, as Batsim computes them.

    Makespan = the last finish time (submissions start at 0); the mean is over jobs that
    started. Batkube's real-cluster CSVs have the same columns (plus their own).
    """
    rows = [r for r in read_rows(path) if r.get("starting_time") not in ("", None)]
    if not rows:
        raise ValueError(f"{path}: no job started")
    makespan = max(float(r["finish_time"]) for r in rows)
    mean_wait = statistics.fmean(float(r["waiting_time"]) for r in rows)
    return makespan, mean_wait


def schedule_figures(path: Path | str) -> tuple[float, float]:
    """(makespan, mean waiting time) of a Batsim ``schedule.csv``."""
    row = read_rows(path)[0]
    return float(row["makespan"]), float(row["mean_waiting_time"])


# ----------------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class Summary:
    """mean, sample standard deviation (0 for one value), min, median, max of a sample."""

    n: int
    mean: float
    stdev: float
    min: float
    median: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Summary:
        data = [float(v) for v in values if not math.isnan(float(v))]
        if not data:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        stdev = statistics.stdev(data) if len(data) > 1 else 0.0
        return cls(
            len(data),
            statistics.fmean(data),
            stdev,
            min(data),
            statistics.median(data),
            max(data),
        )

    def mean_sd(self, digits: int = 1) -> str:
        if self.n == 0:
            return "-"
        if self.n == 1:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.stdev:.{digits}f}"

    def spread(self, digits: int = 2) -> str:
        if self.n == 0:
            return "-"
        return f"{self.min:.{digits}f} / {self.median:.{digits}f} / {self.max:.{digits}f}"


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} CPUs"


def simulate_modes() -> set[str]:
    """The ``--mode`` choices of this build's ``timewarp simulate`` (from its ``--help``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "--help"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    return mode_choices(result.stdout)


def mode_choices(help_text: str) -> set[str]:
    """``--mode {a,b}`` in an argparse usage text -> ``{"a", "b"}``."""
    match = re.search(r"--mode \{([^}]*)\}", help_text)
    return set(match.group(1).split(",")) if match else set()


def finish(output: Path, record: list[dict], headers: Sequence[str], table: list) -> int:
    """An experiment's end: ``results.json``, the table, the load; exit 0 iff every run
    in ``record`` (dicts with ``ok``) succeeded."""
    output.mkdir(parents=True, exist_ok=True)
    (output / "results.json").write_text(json.dumps(record, indent=1) + "\n")
    print_table(headers, table)
    print(f"machine load after: {load_average()}")
    return 0 if all(r["ok"] for r in record) else 1


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], file=None) -> None:
    """A plain Markdown table (pastes into docs as is)."""
    file = file or sys.stdout
    cells = [[str(c) for c in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    print(
        "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |",
        file=file,
    )
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|", file=file)
    for row in cells:
        print(
            "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |",
            file=file,
        )
    file.flush()


def shell(cmd: Sequence[str]) -> str:
    return shlex.join(str(c) for c in cmd)


def timewarp_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``python -m timewarp ARGS`` (e.g. the workload tools), raising on failure."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, "-m", "timewarp", *args], capture_output=True, text=True, env=env, cwd=REPO
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"timewarp {' '.join(args)} failed:\n{result.stderr}")
    return result
