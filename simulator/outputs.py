"""Batsim's three CSV outputs, in its exact formats (headers pinned in BATSIM.md).

* ``PREFIX_jobs.csv``: one row per job, in the order jobs ended (completed, killed or
  rejected), as Batsim writes them; times with six decimals; rejected jobs have empty
  time and allocation columns; ``consumed_energy`` is ``-1.000000`` (no energy model);
  ``metadata`` is always double-quoted.
* ``PREFIX_schedule.csv``: alphabetically ordered keys, one value row.
  ``scheduling_time`` / ``simulation_time`` are wall-clock seconds (as in Batsim); pass
  ``reproducible=True`` to write them as 0 so that same inputs give the same bytes.
* ``PREFIX_machine_states.csv``: one row per job start or end per machine, time written
  like C++'s default stream (``%g``: ``5e-10``, ``170``).

Files are written to temporary names and renamed at the end, so a failure leaves no
half-written file. A run stopped early writes *partial* outputs (``partial=True``): the
jobs that ended so far, the machine states so far, and ``batsim_version`` ending in
``-partial`` in schedule.csv, so the files say what they are even without manifest.json.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from simulator.engine import JobRecord, MachineLog

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


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def jobs_rows(records: Iterable[JobRecord]) -> list[str]:
    rows = [JOBS_HEADER]
    for record in records:
        job = record.job
        head = [
            job.local_id,
            job.workload,
            job.profile,
            _f(record.submission_time),
            str(job.res),
            _f(job.walltime),
        ]
        if record.state == "done":
            assert record.start is not None and record.finish is not None
            execution = record.finish - record.start
            turnaround = record.finish - record.submission_time
            stretch = turnaround / execution if execution > 0 else 1.0
            rows.append(
                ",".join(
                    head
                    + [
                        "1" if record.final_state == "COMPLETED_SUCCESSFULLY" else "0",
                        record.final_state,
                        _f(record.start),
                        _f(execution),
                        _f(record.finish),
                        _f(record.start - record.submission_time),
                        _f(turnaround),
                        _f(stretch),
                        str(record.alloc),
                        _f(-1),
                        _quote(record.metadata),
                    ]
                )
            )
        else:
            state = record.final_state or "NOT_FINISHED"
            rows.append(
                ",".join(
                    head + ["0", state, "", "", "", "", "", "", "", _f(-1), _quote(record.metadata)]
                )
            )
    return rows


def schedule_values(
    records: list[JobRecord],
    machines: MachineLog,
    nb_compute: int,
    scheduling_time: float,
    simulation_time: float,
    partial: bool = False,
) -> dict[str, str]:
    done = [r for r in records if r.state == "done"]
    waits, turnarounds, slowdowns = [], [], []
    makespan = 0.0
    for r in done:
        assert r.start is not None and r.finish is not None
        execution = r.finish - r.start
        waits.append(r.start - r.submission_time)
        turnarounds.append(r.finish - r.submission_time)
        slowdowns.append(turnarounds[-1] / execution if execution > 0 else 1.0)
        makespan = max(makespan, r.finish)
    success = sum(1 for r in done if r.final_state == "COMPLETED_SUCCESSFULLY")

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    values = {
        "batsim_version": VERSION + (PARTIAL_SUFFIX if partial else ""),
        "consumed_joules": _f(0.0),
        "makespan": _f(makespan),
        "max_slowdown": _f(max(slowdowns, default=0.0)),
        "max_turnaround_time": _f(max(turnarounds, default=0.0)),
        "max_waiting_time": _f(max(waits, default=0.0)),
        "mean_slowdown": _f(mean(slowdowns)),
        "mean_turnaround_time": _f(mean(turnarounds)),
        "mean_waiting_time": _f(mean(waits)),
        "nb_computing_machines": str(nb_compute),
        "nb_grouped_switches": "0",
        "nb_jobs": str(len(records)),
        "nb_jobs_finished": str(len(done)),
        "nb_jobs_killed": str(len(done) - success),
        "nb_jobs_rejected": str(sum(1 for r in records if r.state == "rejected")),
        "nb_jobs_success": str(success),
        "nb_machine_switches": "0",
        "scheduling_time": _f(scheduling_time),
        "simulation_time": _f(simulation_time),
        "success_rate": _f(success / len(records) if records else 0.0),
        "time_computing": _f(machines.time_in_state["computing"]),
        "time_idle": _f(machines.time_in_state["idle"]),
        "time_sleeping": _f(0.0),
        "time_switching_off": _f(0.0),
        "time_switching_on": _f(0.0),
        "time_unavailable": _f(0.0),
    }
    assert list(values) == SCHEDULE_KEYS
    return values


def machine_state_rows(machines: MachineLog) -> list[str]:
    rows = [MACHINE_STATES_HEADER]
    rows.extend(f"{time:g},0,0,0,{idle},{computing}" for time, idle, computing in machines.rows)
    return rows


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
    schedule = schedule_values(
        records, machines, nb_compute, scheduling_time, simulation_time, partial
    )
    contents = {
        f"{prefix}_jobs.csv": jobs_rows(records),
        f"{prefix}_schedule.csv": [",".join(schedule), ",".join(schedule.values())],
        f"{prefix}_machine_states.csv": machine_state_rows(machines),
    }
    paths = [Path(name) for name in contents]
    if paths[0].parent != Path(""):
        paths[0].parent.mkdir(parents=True, exist_ok=True)
    temporaries = []
    try:
        for path, rows in zip(paths, contents.values(), strict=True):
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text("\n".join(rows) + "\n", encoding="utf-8")
            temporaries.append(tmp)
        for tmp, path in zip(temporaries, paths, strict=True):
            os.replace(tmp, path)
    finally:
        for tmp in temporaries:
            if tmp.exists():
                tmp.unlink()
    return paths
