"""Batsim's three CSV outputs, in its exact formats (headers pinned in BATSIM.md).

* ``PREFIX_jobs.csv``: one row per job, in the order jobs ended (completed, killed or
  rejected), as Batsim writes them; times with six decimals; rejected jobs have empty
  time and allocation columns; ``consumed_energy`` is ``-1.000000`` without ``-E`` (its
  machines' joules while it ran with it), empty for a rejected job;
  ``metadata`` is always double-quoted.
* ``PREFIX_schedule.csv``: alphabetically ordered keys, one value row.
  ``scheduling_time`` / ``simulation_time`` are wall-clock seconds (as in Batsim); pass
  ``reproducible=True`` to write them as 0 so that same inputs give the same bytes.
* ``PREFIX_machine_states.csv``: one row per job start or end (whatever its number of
  machines), per power-state request and per switch done: the machines sleeping,
  switching on, switching off, idle, computing; time written like C++'s default stream
  (``%g``: ``5e-10``, ``170``).

Files are written to temporary names and renamed at the end, so a failure leaves no
half-written file. A run stopped early writes *partial* outputs (``partial=True``): the
jobs that ended so far, the machine states so far, and ``batsim_version`` ending in
``-partial`` in schedule.csv, so the files say what they are even without manifest.json;
and timewarp's ``PREFIX_running.csv``: the jobs still running at the stop (``job_id``,
``workload_name``, ``profile``, ``submission_time``, ``starting_time``,
``allocated_resources``, ``stopped_at``), which Batsim's files cannot show.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from simulator.engine import JobRecord, MachineLog
from simulator.protocol import procset_text

JOBS_HEADER = (
    "job_id,workload_name,profile,submission_time,requested_number_of_resources,"
    "requested_time,success,final_state,starting_time,execution_time,finish_time,"
    "waiting_time,turnaround_time,stretch,allocated_resources,consumed_energy,metadata"
)
MACHINE_STATES_HEADER = "time,nb_sleeping,nb_switching_on,nb_switching_off,nb_idle,nb_computing"
SCHEDULE_KEYS = (
    "batsim_version,consumed_joules,makespan,max_slowdown,max_turnaround_time,"
    "max_waiting_time,mean_slowdown,mean_turnaround_time,mean_waiting_time,"
    "nb_computing_machines,nb_grouped_switches,nb_jobs,nb_jobs_finished,nb_jobs_killed,"
    "nb_jobs_rejected,nb_jobs_success,nb_machine_switches,scheduling_time,simulation_time,"
    "success_rate,time_computing,time_idle,time_sleeping,time_switching_off,"
    "time_switching_on,time_unavailable"
).split(",")
VERSION = "4.2.1-timewarp"
PARTIAL_SUFFIX = "-partial"


def _f(value: float) -> str:
    return f"{value:.6f}"


def _joules(value: Any) -> str:
    """A job's energy: a float (-1: no energy model) or Batsim's long double."""
    if isinstance(value, float):
        return _f(value)
    import numpy

    return numpy.format_float_positional(value, precision=6, unique=False, trim="k")


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def job_row(record: JobRecord) -> str:
    """One ``jobs.csv`` row, as Batsim writes it when the job ends."""
    job = record.job
    submitted = record.submission_time
    if record.state == "done":
        start, finish = record.start, record.finish
        assert start is not None and finish is not None
        execution = finish - start
        turnaround = finish - submitted
        stretch = turnaround / execution if execution > 0 else 1.0
        success = "1" if record.final_state == "COMPLETED_SUCCESSFULLY" else "0"
        # one format for the whole row (a job's row is written once per job): each field
        # as the general path below writes it (_f's ".6f")
        return (
            f"{job.local_id},{job.workload},{job.profile},{submitted:.6f},{job.res},"
            f"{job.walltime:.6f},{success},{record.final_state},{start:.6f},{execution:.6f},"
            f"{finish:.6f},{start - submitted:.6f},{turnaround:.6f},{stretch:.6f},"
            f"{procset_text(record.alloc)},{_joules(record.energy)},{_quote(record.metadata)}"
        )  # (energy: -1 without -E)
    head = [job.local_id, job.workload, job.profile, _f(submitted), str(job.res),
            _f(job.walltime)]  # fmt: skip
    state = record.final_state or "NOT_FINISHED"
    energy = "" if state == "REJECTED" else _f(-1.0)  # Batsim writes none for a rejection
    tail = ["0", state, "", "", "", "", "", "", "", energy, _quote(record.metadata)]
    return ",".join(head + tail)


def jobs_rows(records: Iterable[JobRecord]) -> list[str]:
    return [JOBS_HEADER, *(job_row(record) for record in records)]


class ScheduleSums:
    """``schedule.csv``'s figures, summed job by job as jobs end (in that order, so the
    float sums are the same whether the jobs are streamed or listed)."""

    def __init__(self) -> None:
        self.jobs = self.done = self.success = self.rejected = 0
        self.makespan = self.max_wait = self.max_turnaround = self.max_slowdown = 0.0
        self.sum_wait = self.sum_turnaround = self.sum_slowdown = 0.0

    def add(self, record: JobRecord) -> None:
        self.jobs += 1
        if record.state == "rejected":
            self.rejected += 1
        if record.state != "done":
            return
        assert record.start is not None and record.finish is not None
        execution = record.finish - record.start
        wait = record.start - record.submission_time
        turnaround = record.finish - record.submission_time
        slowdown = turnaround / execution if execution > 0 else 1.0
        self.done += 1
        self.success += record.final_state == "COMPLETED_SUCCESSFULLY"
        self.makespan = max(self.makespan, record.finish)
        self.sum_wait += wait
        self.sum_turnaround += turnaround
        self.sum_slowdown += slowdown
        self.max_wait = max(self.max_wait, wait)
        self.max_turnaround = max(self.max_turnaround, turnaround)
        self.max_slowdown = max(self.max_slowdown, slowdown)

    def values(
        self,
        machines: MachineLog,
        nb_compute: int,
        scheduling_time: float,
        simulation_time: float,
        partial: bool = False,
        consumed_joules: float = 0.0,
        switches: tuple[int, int] = (0, 0),
    ) -> dict[str, str]:
        """The values (``switches``: Batsim's nb_grouped_switches, nb_machine_switches)."""
        done = self.done

        def mean(total: float) -> float:
            return total / done if done else 0.0

        values = {
            "batsim_version": VERSION + (PARTIAL_SUFFIX if partial else ""),
            "consumed_joules": _f(consumed_joules),
            "makespan": _f(self.makespan),
            "max_slowdown": _f(self.max_slowdown),
            "max_turnaround_time": _f(self.max_turnaround),
            "max_waiting_time": _f(self.max_wait),
            "mean_slowdown": _f(mean(self.sum_slowdown)),
            "mean_turnaround_time": _f(mean(self.sum_turnaround)),
            "mean_waiting_time": _f(mean(self.sum_wait)),
            "nb_computing_machines": str(nb_compute),
            "nb_grouped_switches": str(switches[0]),
            "nb_jobs": str(self.jobs),
            "nb_jobs_finished": str(done),
            "nb_jobs_killed": str(done - self.success),
            "nb_jobs_rejected": str(self.rejected),
            "nb_jobs_success": str(self.success),
            "nb_machine_switches": str(switches[1]),
            "scheduling_time": _f(scheduling_time),
            "simulation_time": _f(simulation_time),
            "success_rate": _f(self.success / self.jobs if self.jobs else 0.0),
            "time_computing": _f(machines.time_in_state["computing"]),
            "time_idle": _f(machines.time_in_state["idle"]),
            "time_sleeping": _f(machines.time_in_state["sleeping"]),
            "time_switching_off": _f(machines.time_in_state["switching_off"]),
            "time_switching_on": _f(machines.time_in_state["switching_on"]),
            "time_unavailable": _f(0.0),
        }
        assert list(values) == SCHEDULE_KEYS
        return values


def machine_state_row(time: float, *counts: int) -> str:
    """``counts``: the machines sleeping, switching on, switching off, idle, computing."""
    if len(counts) == 5:  # (always: one format, the same text as the join below)
        sleeping, switching_on, switching_off, idle, computing = counts
        return f"{time:g},{sleeping},{switching_on},{switching_off},{idle},{computing}"
    return f"{time:g}," + ",".join(map(str, counts))


def machine_state_rows(machines: MachineLog) -> list[str]:
    return [MACHINE_STATES_HEADER, *(machine_state_row(*row) for row in machines.rows)]


RUNNING_HEADER = (
    "job_id,workload_name,profile,submission_time,starting_time,allocated_resources,stopped_at"
)


def running_path(prefix: str) -> Path:
    return Path(f"{prefix}_running.csv")


def write_running(prefix: str, records: Iterable[JobRecord], now: float) -> Path:
    """``PREFIX_running.csv``: the jobs that started and had not ended at ``now``."""
    rows = [RUNNING_HEADER]
    for record in records:
        if record.state in ("running", "completed") and record.start is not None:
            job = record.job
            rows.append(
                ",".join(
                    [job.local_id, job.workload, job.profile, _f(record.submission_time),
                     _f(record.start), str(record.alloc), _f(now)]
                )
            )  # fmt: skip
    path = running_path(prefix)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(rows) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def _paths(prefix: str) -> list[Path]:
    return [Path(f"{prefix}_{kind}.csv") for kind in ("jobs", "schedule", "machine_states")]


def write_outputs(
    prefix: str,
    records: list[JobRecord],
    machines: MachineLog,
    nb_compute: int,
    scheduling_time: float,
    simulation_time: float,
    partial: bool = False,
) -> list[Path]:
    """Write the three files atomically; return their paths."""
    stream = StreamingOutputs(prefix, nb_compute)
    for record in records:
        stream.job_ended(record)
    for row in machines.rows:
        stream.machine_row(*row)
    return stream.finish(machines, scheduling_time, simulation_time, partial)


class _Ended:
    """What a ``jobs.csv`` row and schedule.csv's sums read of a job that ended, kept
    while the row waits in :class:`StreamingOutputs` (the engine forgets the record)."""

    __slots__ = ("job", "state", "start", "finish", "submission_time", "final_state", "alloc",
                 "energy", "metadata")  # fmt: skip

    def __init__(self, record: JobRecord) -> None:
        self.job, self.state, self.final_state = record.job, record.state, record.final_state
        self.start, self.finish, self.submission_time = (
            record.start,
            record.finish,
            record.submission_time,
        )
        self.alloc, self.energy, self.metadata = record.alloc, record.energy, record.metadata


class StreamingOutputs:
    """Batsim's three files written as the simulation goes — a ``jobs.csv`` row when a job
    ends, a ``machine_states.csv`` row when a machine changes, into temporary files — and
    made final at the end (``schedule.csv`` from running sums, then every file renamed
    into place), so that memory stays flat in the number of jobs that ended and a failure
    leaves no half-written file (:meth:`discard`).

    Rows are held (what they need, not their text) and written by :meth:`write_held`,
    which the runner calls while the decision process computes its reply — the
    simulator's formatting then overlaps the decision process's work instead of adding
    to the wall time — and at least every ``HOLD`` rows, and at :meth:`finish`: the
    same rows in the same order, the same sums."""

    HOLD = 256

    def __init__(self, prefix: str, nb_compute: int) -> None:
        self.paths = _paths(prefix)
        self.nb_compute = nb_compute
        self.sums = ScheduleSums()
        if self.paths[0].parent != Path(""):
            self.paths[0].parent.mkdir(parents=True, exist_ok=True)
        self._tmp = [path.with_name(path.name + ".tmp") for path in self.paths]
        self._jobs = open(self._tmp[0], "w", encoding="utf-8")  # noqa: SIM115
        self._machines = open(self._tmp[2], "w", encoding="utf-8")  # noqa: SIM115
        self._jobs.write(JOBS_HEADER + "\n")
        self._machines.write(MACHINE_STATES_HEADER + "\n")
        self._held_jobs: list[_Ended] = []
        self._held_machines: list[tuple[float, tuple[int, ...]]] = []

    def job_ended(self, record: JobRecord) -> None:
        self._held_jobs.append(_Ended(record))
        if len(self._held_jobs) >= self.HOLD:
            self.write_held()

    def machine_row(self, time: float, *counts: int) -> None:
        self._held_machines.append((time, counts))
        if len(self._held_machines) >= self.HOLD:
            self.write_held()

    def write_held(self) -> None:
        """Write the rows held so far (and add the jobs to the sums), in order."""
        if self._held_jobs:
            write, add = self._jobs.write, self.sums.add
            for ended in self._held_jobs:
                write(job_row(ended) + "\n")  # type: ignore[arg-type]
                add(ended)  # type: ignore[arg-type]
            self._held_jobs = []
        if self._held_machines:
            write = self._machines.write
            for time, counts in self._held_machines:
                write(machine_state_row(time, *counts) + "\n")
            self._held_machines = []

    def finish(
        self,
        machines: MachineLog,
        scheduling_time: float,
        simulation_time: float,
        partial: bool = False,
        consumed_joules: float = 0.0,
        switches: tuple[int, int] = (0, 0),
    ) -> list[Path]:
        """Write ``schedule.csv`` (``machines``: the time spent in each state) and put the
        three files in place; returns their paths."""
        self.write_held()
        values = self.sums.values(
            machines,
            self.nb_compute,
            scheduling_time,
            simulation_time,
            partial,
            consumed_joules,
            switches,
        )
        try:
            self._jobs.close()
            self._machines.close()
            self._tmp[1].write_text(
                ",".join(values) + "\n" + ",".join(values.values()) + "\n", encoding="utf-8"
            )
            for tmp, path in zip(self._tmp, self.paths, strict=True):
                os.replace(tmp, path)
        finally:
            self.discard()
        return self.paths

    def discard(self) -> None:
        """Remove what is not in place (all of it, if :meth:`finish` was not called)."""
        self._jobs.close()
        self._machines.close()
        for tmp in self._tmp:
            tmp.unlink(missing_ok=True)


ENERGY_HEADER = "time,energy,event_type,wattmin,epower"
PSTATE_HEADER = "time,machine_id,new_pstate"


def write_energy(
    prefix: str,
    rows: list[tuple[float, Any, str, float]],
    pstates: list[int],
    changes: Iterable[tuple[float, str, int]] = (),
) -> list[Path]:
    """``-E``'s files, as Batsim writes them: ``_consumed_energy.csv`` (a row per job start
    ``s`` and end ``e``, per power-state request and switch done ``p``: the compute
    machines' energy, their idle power, and the mean power since the row before — ``NA``
    at the same instant) and ``_pstate_changes.csv`` (the initial power state of the
    machines, grouped by state, then ``changes``: time, machines, state)."""
    import numpy

    lines = [ENERGY_HEADER]
    last_time, last_energy = numpy.longdouble(0), numpy.longdouble(0)
    for time, energy, kind, wattmin in rows:  # in long double, as Batsim computes them
        span = numpy.longdouble(time) - last_time
        epower = _f(float((energy - last_energy) / span)) if span > 0 else "NA"
        joules = numpy.format_float_positional(energy, precision=6, unique=False, trim="k")
        lines.append(f"{_f(time)},{joules},{kind},{_f(wattmin)},{epower}")
        last_time, last_energy = numpy.longdouble(time), energy
    from procset import ProcSet

    groups: dict[int, list[int]] = {}
    for machine, pstate in enumerate(pstates):
        groups.setdefault(pstate, []).append(machine)
    initial = [PSTATE_HEADER] + [
        f"0,{ProcSet(*machines)},{pstate}" for pstate, machines in sorted(groups.items())
    ]
    lines_changes = [f"{time:g},{machines},{pstate}" for time, machines, pstate in changes]
    paths = [Path(f"{prefix}_consumed_energy.csv"), Path(f"{prefix}_pstate_changes.csv")]
    for path, text in zip(paths, (lines, initial + lines_changes), strict=True):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("\n".join(text) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    return paths
