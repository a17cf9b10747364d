"""The discrete-event core: Batsim's behaviour without sockets.

:class:`Simulator` is driven by messages: :meth:`Simulator.first_message` returns
SIMULATION_BEGINS, then each call of :meth:`Simulator.handle_reply` applies the decision
process's reply and returns the next message to send, until SIMULATION_ENDS. No zmq here,
so tests and benchmarks can drive it in-process with any decision function.

Time and order (the invariants that make runs deterministic):

* Internal events sit in a heap ordered by ``(time, priority, sequence)``; priorities, for
  events at the same instant: job end < walltime < submission < no-more-static-jobs <
  requested call. ``sequence`` is a counter, so ties keep their creation order.
* A reply's events are applied in order, each at ``max(timestamp, now)``; internal events
  due at or before that instant happen first (a decision cannot see what it was not told).
  Then time advances to the reply's ``now``.
* Everything that happened is delivered in the next message, stamped with the time it
  happened; the message's ``now`` is the current time. When nothing happened, time jumps
  to the next internal event and every event of that instant goes out in one message.
* Real Batsim delivers a job a few SimGrid communication latencies after its subtime
  (1e-10 s to 45 µs, depending on the platform's links), so the decision process never
  sees a submission at ``now == 0`` (pybatsim's ``batsim.sched`` API asserts that).
  timewarp models that with one fixed ``submission_latency`` (default 1e-9 s; 0 gives
  exact subtimes). Every other time is exact: a job ends at start + duration.

The simulation ends (SIMULATION_ENDS) when every static job was submitted, every known job
finished or was rejected, no CALL_ME_LATER is pending and, with dynamic jobs, the decision
process said ``registration_finished``. If it has not ended and nothing is left to happen,
that is a :class:`Deadlock` (real Batsim would hang or abort).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

from procset import ProcSet

from simulator import protocol as p
from simulator.platform import Platform
from simulator.workload import (
    Job,
    Workload,
    WorkloadError,
    base_duration,
    has_sharing_slowdown,
    parse_job,
    validate_profile,
)

# priorities of internal events at the same instant
_END, _WALLTIME, _SUBMIT, _NO_MORE_STATIC, _CALL = range(5)


class DecisionError(p.ProtocolError):
    """The decision process asked for something Batsim forbids (job executed twice, busy
    machine without compute sharing, CALL_ME_LATER not in the future, …)."""


class Deadlock(RuntimeError):
    """Nothing is left to happen but the simulation has not ended."""


@dataclass(frozen=True)
class Options:
    allow_compute_sharing: bool = False
    allow_storage_sharing: bool = True
    forward_profiles: bool = False
    dynamic_jobs: bool = False
    acknowledge_dynamic_jobs: bool = False
    profile_reuse: bool = False
    forward_unknown_events: bool = False
    sched_config: str = ""
    submission_latency: float = 1e-9


@dataclass
class JobRecord:
    """A job's life; ``state``: pending → submitted → running → done, or rejected."""

    job: Job
    state: str = "pending"
    submission_time: float = 0.0
    start: float | None = None
    finish: float | None = None
    alloc: ProcSet = field(default_factory=ProcSet)
    final_state: str = ""
    return_code: int = 0
    metadata: str = ""
    work: float = 0.0  # seconds of work at rate 1
    remaining: float = 0.0
    rate: float = 1.0
    last_update: float = 0.0
    version: int = 0
    slowdown: bool = False
    start_seq: int = -1
    end_seq: int = -1  # order of reaching done/rejected: the row order of jobs.csv


@dataclass
class MachineLog:
    """Per compute machine state accounting, as Batsim does it: every job start or end on a
    machine writes one ``machine_states.csv`` row; time is credited to the state left."""

    rows: list[tuple[float, int, int]] = field(default_factory=list)  # time, idle, computing
    time_in_state: dict[str, float] = field(default_factory=lambda: {"idle": 0.0, "computing": 0.0})


class Simulator:
    """Batsim's role, message by message (see the module docstring for the rules)."""

    def __init__(self, platform: Platform, workloads: list[Workload], options: Options) -> None:
        self.platform = platform
        self.workloads = {w.name: w for w in workloads}
        self.options = options
        self.now = 0.0
        self.started = False
        self.ended = False
        self.nb_compute = len(platform.compute)
        self.nb_storage = len(platform.storage)
        self.records: dict[str, JobRecord] = {}
        self._static: list[JobRecord] = []
        for index, workload in enumerate(workloads):
            for job in workload.jobs:
                record = JobRecord(job)
                self.records[job.job_id] = record
                self._static.append(record)
                record.start_seq = index  # temporary: workload index for sorting
        # Batsim's order for equal subtimes: workload, then job id (byte order)
        self._static.sort(key=lambda r: (r.job.subtime, r.start_seq, r.job.local_id.encode()))
        for record in self._static:
            record.start_seq = -1
        self._next_static = 0
        self._heap: list[tuple[float, int, int, str | None, int]] = []
        self._seq = itertools.count()
        self._start_counter = itertools.count()
        self._end_counter = itertools.count()
        self.outbox: list[p.Event] = []
        self.pending_calls = 0
        self.unfinished = 0  # submitted, not yet done or rejected
        self.static_done = False
        self.registration_finished = not options.dynamic_jobs
        self.host_jobs: list[list[str]] = [[] for _ in range(self.nb_compute)]
        self.machine_state = ["idle"] * self.nb_compute
        self.machine_since = [0.0] * self.nb_compute
        self.nb_computing = 0
        self.machines = MachineLog()
        self.resource_states: dict[int, str] = {}
        self.events_processed = 0
        self._speeds = [h.speed for h in platform.compute]
        self._classes = [h.node_class for h in platform.compute]
        if self._static:
            self._push(self._submit_time(self._static[0]), _SUBMIT, None)
        else:
            self._push(0.0, _NO_MORE_STATIC, None)

    # ------------------------------------------------------------------ public API

    def first_message(self) -> p.Message:
        """SIMULATION_BEGINS, at time 0."""
        if self.started:
            raise RuntimeError("first_message() called twice")
        self.started = True
        compute, storage = self.platform.resources_json()
        begins = p.SimulationBegins(
            nb_resources=self.nb_compute + self.nb_storage,
            nb_compute_resources=self.nb_compute,
            nb_storage_resources=self.nb_storage,
            allow_compute_sharing=self.options.allow_compute_sharing,
            allow_storage_sharing=self.options.allow_storage_sharing,
            config={
                "redis-enabled": False,
                "redis-hostname": "127.0.0.1",
                "redis-port": 6379,
                "redis-prefix": "default",
                "profiles-forwarded-on-submission": self.options.forward_profiles,
                "dynamic-jobs-enabled": self.options.dynamic_jobs,
                "dynamic-jobs-acknowledged": self.options.acknowledge_dynamic_jobs,
                "profile-reuse-enabled": self.options.profile_reuse,
                "sched-config": self.options.sched_config,
                "forward-unknown-events": self.options.forward_unknown_events,
            },
            compute_resources=compute,
            storage_resources=storage,
            workloads={w.name: w.path for w in self.workloads.values()},
            profiles={w.name: w.profiles for w in self.workloads.values()},
        )
        return p.Message(0.0, [p.Event(0.0, begins)])

    def handle_reply(self, reply: p.Message) -> p.Message:
        """Apply the decision process's reply; return the next message to send."""
        if not self.started or self.ended:
            raise RuntimeError("handle_reply() outside a running simulation")
        if reply.now < self.now:
            raise DecisionError(
                f"reply now {reply.now} is before the time of the request ({self.now}); "
                "time cannot go backwards"
            )
        for index, event in enumerate(reply.events):
            self._advance_to(max(event.timestamp, self.now))
            try:
                self._apply(event)
            except DecisionError as exc:
                raise DecisionError(
                    f"reply events[{index}] ({event.type}) at {self.now}: {exc}"
                ) from None
        self._advance_to(reply.now)
        while not self.outbox:
            if self._finished():
                self.ended = True
                return p.Message(self.now, [p.Event(self.now, p.SimulationEnds())])
            if not self._heap:
                raise Deadlock(self._deadlock_text())
            self._advance_to(self._heap[0][0])
        events, self.outbox = self.outbox, []
        return p.Message(self.now, events)

    def job_records(self) -> list[JobRecord]:
        """All jobs, ended ones first in the order they ended (Batsim's jobs.csv order)."""
        return sorted(
            self.records.values(),
            key=lambda r: (r.end_seq < 0, r.end_seq, r.job.job_id.encode()),
        )

    def ended_records(self) -> list[JobRecord]:
        """The jobs that ended (completed, killed or rejected) so far, in Batsim's jobs.csv
        order: what a run stopped early can report."""
        return [r for r in self.job_records() if r.state in ("done", "rejected")]

    def machines_so_far(self) -> MachineLog:
        """The machine log with each machine's current state credited up to now (a copy:
        the simulation's own accounting is untouched)."""
        log = MachineLog(list(self.machines.rows), dict(self.machines.time_in_state))
        for host, state in enumerate(self.machine_state):
            log.time_in_state[state] += self.now - self.machine_since[host]
        return log

    # ------------------------------------------------------------------ internals

    def _push(self, time: float, priority: int, job_id: str | None, version: int = 0) -> None:
        heapq.heappush(self._heap, (time, priority, next(self._seq), job_id, version))

    def _advance_to(self, time: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= time:
            when, priority, _, job_id, version = heapq.heappop(heap)
            self.now = when
            self.events_processed += 1
            if priority == _END:
                record = self.records[job_id]
                if record.state == "running" and record.version == version:
                    self._complete(record, "COMPLETED_SUCCESSFULLY", 0)
            elif priority == _WALLTIME:
                record = self.records[job_id]
                if record.state == "running":
                    self._complete(record, "COMPLETED_WALLTIME_REACHED", -1)
            elif priority == _SUBMIT:
                self._submit_next_static()
            elif priority == _NO_MORE_STATIC:
                self.static_done = True
                self._emit(p.Notify("no_more_static_job_to_submit"))
            else:
                self.pending_calls -= 1
                self._emit(p.RequestedCall())
        if time > self.now:
            self.now = time

    def _emit(self, payload: p.Payload) -> None:
        self.outbox.append(p.Event(self.now, payload))

    def _submit_next_static(self) -> None:
        record = self._static[self._next_static]
        self._next_static += 1
        self._submit(record)
        if self._next_static < len(self._static):
            self._push(self._submit_time(self._static[self._next_static]), _SUBMIT, None)
        else:
            self._push(self.now, _NO_MORE_STATIC, None)

    def _submit_time(self, record: JobRecord) -> float:
        return record.job.subtime + self.options.submission_latency

    def _submit(self, record: JobRecord) -> None:
        record.state = "submitted"
        record.submission_time = self.now
        self.unfinished += 1
        profile = None
        if self.options.forward_profiles:
            profile = self.workloads[record.job.workload].profiles[record.job.profile]
        self._emit(p.JobSubmitted(record.job.job_id, record.job.raw, profile))

    def _finished(self) -> bool:
        return (
            self.static_done
            and self.unfinished == 0
            and self.pending_calls == 0
            and self.registration_finished
        )

    def _deadlock_text(self) -> str:
        waiting = [r.job.job_id for r in self.records.values() if r.state == "submitted"]
        parts = [f"nothing left to happen at t={self.now} but the simulation cannot end"]
        if waiting:
            shown = ", ".join(waiting[:5]) + (" …" if len(waiting) > 5 else "")
            parts.append(f"{len(waiting)} submitted job(s) neither executed nor rejected: {shown}")
        if not self.registration_finished:
            parts.append("dynamic jobs are enabled and no NOTIFY registration_finished came")
        return "; ".join(parts)

    # ------------------------------------------------------------------ decisions

    def _record(self, job_id: str) -> JobRecord:
        record = self.records.get(job_id)
        if record is None:
            raise DecisionError(f"unknown job {job_id!r}")
        return record

    def _apply(self, event: p.Event) -> None:
        data = event.data
        if isinstance(data, p.ExecuteJob):
            self._execute(data)
        elif isinstance(data, p.RejectJob):
            record = self._record(data.job_id)
            self._require_submitted(record, "reject")
            record.state = "rejected"
            record.final_state = "REJECTED"
            record.end_seq = next(self._end_counter)
            self.unfinished -= 1
        elif isinstance(data, p.KillJob):
            self._kill(data.job_ids)
        elif isinstance(data, p.CallMeLater):
            if not data.timestamp > self.now:
                raise DecisionError(
                    f"CALL_ME_LATER at {data.timestamp} is not strictly after the current "
                    f"time {self.now}"
                )
            self.pending_calls += 1
            self._push(data.timestamp, _CALL, None)
        elif isinstance(data, p.SetJobMetadata):
            self._record(data.job_id).metadata = data.metadata
        elif isinstance(data, p.SetResourceState):
            total = self.nb_compute + self.nb_storage
            if data.resources.max >= total:
                raise DecisionError(
                    f"resource {data.resources.max} does not exist (resources: 0-{total - 1})"
                )
            for rid in data.resources:
                self.resource_states[rid] = data.state
            self._emit(p.ResourceStateChanged(data.resources, data.state))
        elif isinstance(data, p.Query):
            answers: dict[str, Any] = {}
            for key in data.requests:
                if key != "consumed_energy":
                    raise DecisionError(f"QUERY {key!r} is not supported (only consumed_energy)")
                answers[key] = 0.0
            self._emit(p.Answer(answers))
        elif isinstance(data, p.RegisterProfile):
            self._register_profile(data)
        elif isinstance(data, p.RegisterJob):
            self._register_job(data)
        elif isinstance(data, p.Notify):
            if not self.options.dynamic_jobs:
                raise DecisionError(
                    f"NOTIFY {data.type} needs dynamic jobs (--enable-dynamic-jobs)"
                )
            self.registration_finished = data.type == "registration_finished"
        else:  # pragma: no cover - decode() only lets decision events through
            raise DecisionError(f"{event.type} cannot be sent by a decision process")

    def _require_submitted(self, record: JobRecord, verb: str) -> None:
        state = record.state
        if state == "submitted":
            return
        why = {
            "pending": f"it is not submitted yet (subtime {record.job.subtime})",
            "running": f"it is already running since {record.start} (executed twice?)",
            "done": f"it already finished ({record.final_state})",
            "rejected": "it was rejected",
        }[state]
        raise DecisionError(f"cannot {verb} job {record.job.job_id!r}: {why}")

    def _execute(self, data: p.ExecuteJob) -> None:
        record = self._record(data.job_id)
        self._require_submitted(record, "execute")
        alloc = data.alloc
        if alloc.max >= self.nb_compute:
            raise DecisionError(
                f"alloc {alloc}: resource {alloc.max} is not a compute resource "
                f"(compute resources: 0-{self.nb_compute - 1})"
            )
        if data.mapping is None and len(alloc) != record.job.res:
            raise DecisionError(
                f"alloc {alloc} has {len(alloc)} resource(s) but job {record.job.job_id!r} "
                f"requests res={record.job.res}"
            )
        hosts = list(alloc)
        if not self.options.allow_compute_sharing:
            for host in hosts:
                if self.host_jobs[host]:
                    raise DecisionError(
                        f"machine {host} is busy with {self.host_jobs[host][0]!r} and compute "
                        "sharing is off (run with --enable-compute-sharing to allow it)"
                    )
        workload = self.workloads[record.job.workload]
        profile = workload.profiles[record.job.profile]
        record.state = "running"
        record.start = self.now
        record.alloc = alloc
        record.start_seq = next(self._start_counter)
        record.work = base_duration(
            record.job.profile,
            workload.profiles,
            [self._speeds[h] for h in hosts],
            [self._classes[h] for h in hosts],
        )
        record.remaining = record.work
        record.last_update = self.now
        record.slowdown = has_sharing_slowdown(profile)
        affected = self._sharing_jobs(hosts)
        for other in affected:
            self._settle(other)
        for host in hosts:
            self.host_jobs[host].append(record.job.job_id)
            self._machine_update(host)
        record.rate = self._rate(record)
        self._schedule_end(record)
        for other in affected:
            self._reschedule(other)
        if record.job.walltime > 0:
            self._push(self.now + record.job.walltime, _WALLTIME, record.job.job_id)

    def _kill(self, job_ids: list[str]) -> None:
        progress: dict[str, dict[str, Any]] = {}
        for job_id in job_ids:
            record = self._record(job_id)
            if record.state == "running":
                self._settle(record)
                done = 1.0 if record.work == 0 else 1.0 - record.remaining / record.work
                progress[job_id] = {
                    "profile_name": record.job.profile,
                    "progress": min(1.0, max(0.0, done)),
                }
                self._complete(record, "COMPLETED_KILLED", -1)
            elif record.state != "done":
                raise DecisionError(
                    f"cannot kill job {job_id!r}: it is {record.state}, not running or finished"
                )
        self._emit(p.JobKilled(list(job_ids), progress))

    def _register_profile(self, data: p.RegisterProfile) -> None:
        if not self.options.dynamic_jobs:
            raise DecisionError("REGISTER_PROFILE needs dynamic jobs (--enable-dynamic-jobs)")
        workload = self.workloads.get(data.workload_name)
        if workload is None:
            workload = Workload(data.workload_name, "dynamic", [], {})
            self.workloads[data.workload_name] = workload
        if data.profile_name in workload.profiles and not self.options.profile_reuse:
            raise DecisionError(
                f"profile {data.profile_name!r} already exists in workload {data.workload_name!r}"
            )
        profiles = {**workload.profiles, data.profile_name: data.profile}
        try:
            validate_profile(data.profile_name, data.profile, profiles, "profile")
        except WorkloadError as exc:
            raise DecisionError(f"REGISTER_PROFILE {data.profile_name!r}: {exc}") from None
        workload.profiles[data.profile_name] = data.profile

    def _register_job(self, data: p.RegisterJob) -> None:
        if not self.options.dynamic_jobs:
            raise DecisionError("REGISTER_JOB needs dynamic jobs (--enable-dynamic-jobs)")
        if self.registration_finished:
            raise DecisionError("REGISTER_JOB after NOTIFY registration_finished")
        name = data.job_id.split("!", 1)[0]
        workload = self.workloads.get(name)
        if workload is None:
            raise DecisionError(f"job {data.job_id!r}: no workload {name!r} (register a profile)")
        if data.job_id in self.records:
            raise DecisionError(f"job {data.job_id!r} already exists")
        if data.job.get("id") != data.job_id:
            raise DecisionError(f"job.id {data.job.get('id')!r} differs from job_id")
        try:
            job = parse_job(
                data.job,
                name,
                workload.profiles,
                self.nb_compute,
                "job",
                len(workload.jobs),
                id_has_prefix=True,
            )
        except WorkloadError as exc:
            raise DecisionError(f"REGISTER_JOB {data.job_id!r}: {exc}") from None
        workload.jobs.append(job)
        record = JobRecord(job)
        self.records[job.job_id] = record
        if self.options.acknowledge_dynamic_jobs:
            self._submit(record)
        else:
            record.state = "submitted"
            record.submission_time = self.now
            self.unfinished += 1

    # ------------------------------------------------------------------ execution model

    def _sharing_jobs(self, hosts: list[int]) -> list[JobRecord]:
        """Running jobs with sharing slowdown on ``hosts``, in start order."""
        found: dict[str, JobRecord] = {}
        for host in hosts:
            for job_id in self.host_jobs[host]:
                record = self.records[job_id]
                if record.slowdown:
                    found[job_id] = record
        return sorted(found.values(), key=lambda r: r.start_seq)

    def _rate(self, record: JobRecord) -> float:
        if not record.slowdown:
            return 1.0
        return 1.0 / max(len(self.host_jobs[h]) for h in record.alloc)

    def _settle(self, record: JobRecord) -> None:
        record.remaining = max(
            0.0, record.remaining - record.rate * (self.now - record.last_update)
        )
        record.last_update = self.now

    def _schedule_end(self, record: JobRecord) -> None:
        record.version += 1
        if record.slowdown:
            end = self.now + record.remaining / record.rate
        else:
            end = record.start + record.work  # exact, no accumulated rounding
        self._push(end, _END, record.job.job_id, record.version)

    def _reschedule(self, record: JobRecord) -> None:
        rate = self._rate(record)
        if rate != record.rate:
            record.rate = rate
            self._schedule_end(record)

    def _complete(self, record: JobRecord, state: str, return_code: int) -> None:
        hosts = list(record.alloc)
        record.state = "done"
        record.finish = self.now
        record.final_state = state
        record.return_code = return_code
        record.end_seq = next(self._end_counter)
        self.unfinished -= 1
        affected = [r for r in self._sharing_jobs(hosts) if r is not record]
        for other in affected:
            self._settle(other)
        for host in hosts:
            self.host_jobs[host].remove(record.job.job_id)
            self._machine_update(host)
        for other in affected:
            self._reschedule(other)
        self._emit(p.JobCompleted(record.job.job_id, state, return_code, record.alloc))

    def _machine_update(self, host: int) -> None:
        new = "computing" if self.host_jobs[host] else "idle"
        old = self.machine_state[host]
        self.machines.time_in_state[old] += self.now - self.machine_since[host]
        self.machine_since[host] = self.now
        if old != new:
            self.machine_state[host] = new
            self.nb_computing += 1 if new == "computing" else -1
        self.machines.rows.append(
            (self.now, self.nb_compute - self.nb_computing, self.nb_computing)
        )


def drive(sim: Simulator, decide, *, through_json: bool = False) -> int:
    """Run ``sim`` to the end in-process: ``decide(message) -> reply``. With
    ``through_json`` every message goes through :func:`protocol.encode`/``decode`` as it
    would on the wire. Returns the number of messages exchanged."""
    message = sim.first_message()
    count = 0
    while True:
        if through_json:
            message = p.decode(p.encode(message), "batsim")
        reply = decide(message)
        count += 1
        if through_json:
            reply = p.decode(p.encode(reply), "decision")
        if sim.ended:
            return count
        message = sim.handle_reply(reply)
