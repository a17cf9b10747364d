"""The discrete-event core: Batsim 4.2.1's behaviour without sockets.

:class:`Simulator` is driven by messages: :meth:`Simulator.first_message` returns
SIMULATION_BEGINS, then each call of :meth:`Simulator.handle_reply` applies the decision
process's reply and returns the next message to send, until SIMULATION_ENDS. No zmq here,
so tests and benchmarks can drive it in-process with any decision function.

Time and order are Batsim's own, because the simulator runs Batsim's actors on a model of
SimGrid's scheduling (:mod:`simulator.kernel`):

* a *server* receives one internal message at a time (job submissions, completions,
  decisions, requested calls…); after each one, if the decision process is ready and no
  other message is queued, everything that happened goes out in one message, each event
  stamped with the time it happened, ``now`` the current time — all printed to the
  microsecond (``%f``), as Batsim prints them;
* a *submitter* per workload sends the jobs of one subtime together (jobs of equal
  subtimes in job-id byte order: ``1, 10, 100, 101``…), then NOTIFY
  ``no_more_static_job_to_submit``;
* a *request-reply* actor hands the reply's events to the server one by one, each at its
  timestamp (or at once if that is past) and 1e-10 s after the previous one (a message on
  the master host's loopback), then SCHED_READY at the reply's ``now``;
* one actor per job sleeps its duration (start + duration, exact) and tells the server at
  once; one per CALL_ME_LATER sleeps until the requested time (at least 1e-5 s) and
  tells the server 1e-10 s later; KILL_JOB has its killer.

So the same completions as real Batsim share a message: jobs started by one reply start
1e-10 s apart, SimGrid ends sleeps within 1e-9 s of each other together, and the rest
come in the next message (Batkube's burst: 11, then 5). Sub-microsecond offsets never
show (they are below ``%f``); a job ends at start + duration.

The simulation ends (SIMULATION_ENDS) when every static job was submitted, every known job
finished or was rejected, no CALL_ME_LATER or kill is pending and, with dynamic jobs, the
decision process said ``registration_finished``. If it has not ended and nothing is left to
happen, that is a :class:`Deadlock` (real Batsim: SimGrid reports a deadlock, Batsim writes
empty outputs and exits 0).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy
from procset import ProcSet

from simulator import protocol as p
from simulator.ended_jobs import EndedJobs
from simulator.energy import energy_meter
from simulator.id_set import JobIdSet
from simulator.kernel import (
    BY_NAME,
    BY_NAME_THEN,
    CREATE,
    EXEC,
    EXEC_TIMEOUT,
    GET,
    KILL,
    PAUSE,
    PUT,
    SLEEP,
    TIMED_OUT,
    Actor,
    Kernel,
    Mailbox,
    Ptask,
    Simcall,
)
from simulator.network import PlatformError, ptask_spec
from simulator.pending_jobs import PendingJobs
from simulator.platform import Platform
from simulator.pstates import COMPUTATION, PowerStates
from simulator.pstates import SLEEP as ASLEEP
from simulator.workload import (
    Job,
    Workload,
    WorkloadError,
    base_duration,
    has_communication,
    has_sharing_slowdown,
    parse_job,
    plain_delay,
    ptask_matrices,
    validate_profile,
)

#: Batsim's internal messages are 1 byte. Between two actors of the master host they cross
#: its loopback (SimGrid's default: 10 GB/s, no latency): 1e-10 s. On a platform with
#: links, the route's (``simulator.network``): its latency, then the byte.
LOCAL_COST = (0.0, 1e10)
#: From a job's host to the master: no link joins them in the platforms people write for
#: Batsim (Batkube's, timewarp's generated ones); a route of no link takes no time.
REMOTE_COST = (0.0, 0.0)
#: Batsim's waiter sleeps at least this long ("found by trial and error", its source says).
WAITER_MIN_SLEEP_S = 1e-5
_BY_NAME = (BY_NAME,)
_LONG = numpy.longdouble
# ``_LONG_ZERO + seconds`` is ``_LONG(seconds)`` (adding a double to long double zero is
# exact; the clock is never -0.0) at a fifth of the cost: numpy's longdouble constructor
# takes a slow generic path, its scalar addition does not (tests/test_sim_engine.py)
_LONG_ZERO = _LONG(0)
_NO_RESOURCES = ProcSet()


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
    submission_latency: float = 0.0  # extra delay of every submission (timewarp's)
    energy: bool = False  # Batsim's -E: the hosts' energy (simulator.energy)


@dataclass(slots=True)
class JobRecord:
    """A job's life; ``state``: pending → submitted → running → completed (its actor
    ended) → done (the server reported it), or rejected."""

    job: Job
    state: str = "pending"
    submission_time: float = 0.0
    start: float | None = None
    finish: float | None = None
    alloc: ProcSet = field(default_factory=lambda: _NO_RESOURCES)  # shared: never changed
    hosts: tuple[int, ...] = ()  # alloc's resources, listed once (ProcSet's len is a sum)
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
    deadline: float = 0.0  # when its actor wakes (end, or walltime)
    walltime_end: float | None = None
    actor: Actor | None = None
    kill_requested: bool = False
    energy: Any = -1.0  # joules its machines used while it ran (long double; -1: no -E)
    loads: tuple[tuple[int, float], ...] = ()  # flops/s its computation puts on hosts now
    task: _Task | None = None  # the task its actor runs now, since task_start
    task_start: float = 0.0


@dataclass(frozen=True)
class _Task:
    """One task of a job's profile: ``seconds`` alone; ``rate`` > 0 for a parallel task."""

    seconds: float
    rate: float
    name: str
    path: tuple[tuple[str, int], ...] = ()
    ptask: Ptask | None = None  # a task with communication (its run time not known ahead)


#: A compute machine's states, in the order of machine_states.csv's columns.
MACHINE_STATES = ("sleeping", "switching_on", "switching_off", "idle", "computing")


@dataclass
class MachineLog:
    """Per compute machine state accounting, as Batsim does it: every job start or end (and
    every power-state request, every switch done) writes one ``machine_states.csv`` row —
    the number of machines in each state; time is credited to the state left, per machine
    in long double (x87's 80 bits, numpy's ``longdouble``), as Batsim counts it."""

    rows: list[tuple[float, int, int, int, int, int]] = field(default_factory=list)
    spent: list[dict[str, Any]] = field(default_factory=list)  # per machine, per state

    @property
    def time_in_state(self) -> dict[str, float]:
        """Seconds in each state, summed machine after machine as schedule.csv's are."""
        totals = dict.fromkeys(MACHINE_STATES, _LONG(0))
        for machine in self.spent:
            for state, seconds in machine.items():
                totals[state] += seconds
        return {state: float(seconds) for state, seconds in totals.items()}


class Simulator:
    """Batsim's role, message by message (see the module docstring for the rules)."""

    def __init__(self, platform: Platform, workloads: list[Workload], options: Options) -> None:
        self.platform = platform
        # copies: registrations and Batsim's profile clean-up change them. Their jobs are
        # held by their records only (the submitters', then ``records`` until each ends)
        used = {w.name: _used_profiles(w) for w in workloads}
        originals, workloads = (
            workloads,
            [Workload(w.name, w.path, [], dict(w.profiles)) for w in workloads],
        )
        self.workloads = {w.name: w for w in workloads}
        self.options = options
        self.started = False
        self.ended = False
        self.nb_compute = len(platform.compute)
        self.nb_storage = len(platform.storage)
        self.records: dict[str, JobRecord] = {}  # jobs not ended, or all without a sink
        self.ended_jobs = EndedJobs()  # the jobs _forget() dropped from ``records``
        self._job_counts = {w.name: len(w.jobs) for w in originals}  # REGISTER_JOB's order
        # the static jobs not yet submitted, compact (simulator.pending_jobs); one named by
        # a decision before its submission is built early, into ``records``
        self._pending = [PendingJobs(w.name, w.jobs) for w in originals]
        self._static_ids = JobIdSet(job.job_id for w in originals for job in w.jobs)
        self._built_early: set[str] = set()
        self._load_rank = {w.name: index for index, w in enumerate(originals)}
        self._job_counts_static = dict(self._job_counts)
        self._start_counter = itertools.count()
        self.jobs_ended = 0  # done or rejected, as the server learnt it (jobs.csv rows)
        self.pending_calls = 0  # CALL_ME_LATER received, REQUESTED_CALL not yet sent
        self.unfinished = 0  # submitted, not yet done or rejected (server's view)
        self.running = 0  # executed, completion not yet handled by the server
        self.killers = 0
        self.static_done = False
        self.registration_finished = not options.dynamic_jobs
        self.host_jobs: list[list[str]] = [[] for _ in range(self.nb_compute)]
        self.machine_state = ["idle"] * self.nb_compute
        self.machine_since = [_LONG(0)] * self.nb_compute
        self.nb_in_state = dict.fromkeys(MACHINE_STATES, 0)
        self.nb_in_state["idle"] = self.nb_compute
        self._slowdown_running = 0  # running jobs with timewarp's sharing slowdown
        self.machines = MachineLog(
            spent=[dict.fromkeys(MACHINE_STATES, _LONG(0)) for _ in range(self.nb_compute)]
        )
        self.resource_states: dict[int, str] = {}
        self.events_processed = 0  # messages handled by Batsim's server actor
        self.kernel = Kernel()
        self._speeds = [h.speed for h in platform.compute]
        self._classes = [h.node_class for h in platform.compute]
        # what a message costs: from an actor of the master host, from a job's first host.
        # With links or communicating tasks, resources are shared as SimGrid shares them
        # (every action's rate solved at each step); without, each runs at its own rate
        communicating = any(
            has_communication(profile) for w in workloads for profile in w.profiles.values()
        )
        network = platform.network
        if communicating or (network is not None and network.has_links):
            self.kernel.constraints = {}
        self._local, self._remote = platform.message_costs(self.kernel.constraints)
        # -E: the compute machines' energy, and the rows of _consumed_energy.csv
        self.energy = energy_meter(platform) if options.energy else None
        if self.energy is not None and communicating:
            raise PlatformError(
                f"{platform.path}: -E/--energy with parallel tasks that communicate: their "
                "hosts' load follows the network's sharing, which the energy model does not "
                "follow (use real Batsim, or com = 0)"
            )
        # and the power states SET_RESOURCE_STATE switches (simulator.pstates)
        self.power = PowerStates(platform) if options.energy else None
        self.energy_rows: list[tuple[float, Any, str, float]] = []  # energy: long double
        self.energy_first_submission: float | None = None
        self.energy_last_completion = 0.0
        # Batsim's state around its server actor
        self._box = Mailbox("server")
        self._writer: list[p.Event] = []  # what the next message will carry
        self._sched_ready = False
        self._end_sent = False
        self._ack = False
        self._submitters = len(self._pending)
        self._submitters_done = 0
        self._request: p.Message | None = None
        self._sink: Any = None
        self._profiles_cache: dict[str, dict[str, dict[str, Any]]] = {}
        # Batsim's profile clean-up: profiles no job uses are dropped when the workload is
        # loaded, and (without --enable-profile-reuse) a job's profile name is dropped when
        # the job is forgotten, after the message that reported its end (the jobs that hold
        # the profile still run it); naming a dropped profile again aborts Batsim
        self._removed_profiles: set[tuple[str, str]] = set()
        self._ended_since_send: list[JobRecord] = []
        for workload in workloads:
            for name in [n for n in workload.profiles if n not in used[workload.name]]:
                del workload.profiles[name]
                self._removed_profiles.add((workload.name, name))
        for pending in self._pending:
            self.kernel.spawn(self._submitter(pending), "workload_submitter")
        self.kernel.spawn(self._server(), "server")

    # ------------------------------------------------------------------ public API

    @property
    def now(self) -> float:
        """Batsim's clock (SimGrid's: sub-microsecond offsets included)."""
        return self.kernel.clock

    def first_message(self) -> p.Message:
        """SIMULATION_BEGINS, at time 0."""
        if self.started:
            raise RuntimeError("first_message() called twice")
        self.started = True
        return self._next_message()

    def handle_reply(self, reply: p.Message) -> p.Message:
        """Apply the decision process's reply; return the next message to send."""
        if not self.started or self.ended:
            raise RuntimeError("handle_reply() outside a running simulation")
        request = self._request
        assert request is not None
        if reply.now < request.now:
            raise DecisionError(
                f"reply now {reply.now} is before the time of the request ({request.now}); "
                "time cannot go backwards"
            )
        self.kernel.resume(reply)
        return self._next_message()

    def stream_to(self, sink: Any) -> None:
        """Hand each job's end (``sink.job_ended(record)``, in jobs.csv's order) and each
        machine_states.csv row (``sink.machine_row(time, idle, computing)``) to ``sink``
        as they happen, instead of keeping the rows (``outputs.StreamingOutputs``)."""
        self._sink = sink

    @property
    def jobs_count(self) -> int:
        """Jobs known so far (static and registered), ended or not."""
        pending = sum(len(jobs) for jobs in self._pending) - len(self._built_early)
        return len(self.records) + len(self.ended_jobs) + pending

    def job_records(self) -> list[JobRecord]:
        """All jobs, ended ones first in the order they ended (Batsim's jobs.csv order)."""
        pending = [
            JobRecord(job)
            for jobs in self._pending
            for job in jobs
            if job.job_id not in self._built_early
        ]
        return sorted(
            [*self.records.values(), *pending],
            key=lambda r: (r.end_seq < 0, r.end_seq, r.job.job_id.encode()),
        )

    def records_in_load_order(self, records: Iterable[JobRecord]) -> list[JobRecord]:
        """``records`` in the order the simulator once held them all: the static jobs
        workload by workload in file order, then the registered ones as they came."""

        def key(record: JobRecord) -> tuple:
            job = record.job
            if 0 <= job.order < self._job_counts_static.get(job.workload, 0):
                return (0, self._load_rank[job.workload], job.order)
            return (1,)  # stable: registration order kept

        return sorted(records, key=key)

    def machines_so_far(self) -> MachineLog:
        """The machine log with each machine's current state credited up to now (a copy:
        the simulation's own accounting is untouched)."""
        log = MachineLog(list(self.machines.rows), [dict(m) for m in self.machines.spent])
        now = _LONG(self.now)
        for host, state in enumerate(self.machine_state):
            log.spent[host][state] += now - self.machine_since[host]
        return log

    # ------------------------------------------------------------------ the actors

    def _next_message(self) -> p.Message:
        message = self.kernel.run()
        if message is None:
            raise Deadlock(self._deadlock_text())
        self._request = message
        return message

    # Batsim's ``send_message`` is two simcalls: look the server's mailbox up, then a
    # blocking put; yielded as one ``(BY_NAME_THEN, (PUT, self._box, payload, rate))``
    # (the kernel plays both without resuming the actor in between), written out where it
    # happens (a generator per send cost a tenth of the engine)

    def _server(self) -> Iterator[Simcall]:
        """Batsim's server actor: receives one message at a time; after each, sends what
        happened to the decision process when it is ready *and* nothing else is queued."""
        compute, storage = self.platform.resources_json()
        options = self.options
        self._emit(
            p.SimulationBegins(
                nb_resources=self.nb_compute + self.nb_storage,
                nb_compute_resources=self.nb_compute,
                nb_storage_resources=self.nb_storage,
                allow_compute_sharing=options.allow_compute_sharing,
                allow_storage_sharing=options.allow_storage_sharing,
                config={
                    "redis-enabled": False,
                    "redis-hostname": "127.0.0.1",
                    "redis-port": 6379,
                    "redis-prefix": "default",
                    "profiles-forwarded-on-submission": options.forward_profiles,
                    "dynamic-jobs-enabled": options.dynamic_jobs,
                    "dynamic-jobs-acknowledged": options.acknowledge_dynamic_jobs,
                    "profile-reuse-enabled": options.profile_reuse,
                    "sched-config": options.sched_config,
                    "forward-unknown-events": options.forward_unknown_events,
                },
                compute_resources=compute,
                storage_resources=storage,
                workloads={w.name: w.path for w in self.workloads.values()},
                profiles={w.name: self._profiles_json(w.name) for w in self.workloads.values()},
            )
        )
        yield from self._generate_and_send()
        box = self._box
        while not self._ack:
            message = yield (BY_NAME_THEN, (GET, box))
            self.events_processed += 1
            if message[0] == "decision":
                yield from self._on_decision(message)
            else:
                self._on_message(message)
            if self._sched_ready and not self._ack:
                yield _BY_NAME  # mailbox_empty() looks the mailbox up first
                if not box.queue:
                    if self._writer:
                        yield from self._generate_and_send()
                    elif self._finished() and not self._end_sent:
                        self._emit(p.SimulationEnds())
                        yield from self._generate_and_send(ends=True)
                        self._end_sent = True

    def _generate_and_send(self, ends: bool = False) -> Iterator[Simcall]:
        """Batsim's generate-and-send: what happened, in one message (``ends``: it
        carries SIMULATION_ENDS), exchanged by a request-reply actor of its own."""
        now = p.wire_time(self.kernel.clock)
        events = self._writer  # (their times are printed ones already: _emit)
        self._writer = []
        self._sched_ready = False
        if ends:
            self.ended = True
        yield (CREATE, self._request_reply(p.Message(now, events)), "Scheduler REQ-REP")
        # Batsim forgets the jobs this message reported ended (and their profiles' names)
        if not self.options.profile_reuse:
            for record in self._ended_since_send:
                self._removed_profiles.add((record.job.workload, record.job.profile))
                self._profiles_cache.pop(record.job.workload, None)
        self._ended_since_send = []

    def _request_reply(self, message: p.Message) -> Iterator[Simcall]:
        """One exchange with the decision process, then its decisions go to the server one
        by one (each at its own timestamp, 1e-10 s apart), then SCHED_READY at the
        reply's ``now``."""
        reply = yield (PAUSE, message)
        kernel = self.kernel
        for index, event in enumerate(reply.events):
            if isinstance(event.data, p.RegisterJob):
                self._check_profile_alive(index, event)  # Batsim's reader looks it up now
            if event.timestamp > kernel.clock:
                yield (SLEEP, event.timestamp - kernel.clock)
            yield (BY_NAME_THEN, (PUT, self._box, ("decision", index, event), self._local))
        if reply.now > kernel.clock:
            yield (SLEEP, reply.now - kernel.clock)
        yield (BY_NAME_THEN, (PUT, self._box, ("ready",), self._local))

    def _check_profile_alive(self, index: int, event: p.Event) -> None:
        data = event.data
        assert isinstance(data, p.RegisterJob)
        workload, profile = data.job_id.split("!", 1)[0], data.job.get("profile")
        if (workload, profile) in self._removed_profiles:
            raise DecisionError(
                f"reply events[{index}] (REGISTER_JOB) at {p.wire_time(self.now)}: REGISTER_JOB "
                f"{data.job_id!r}: Batsim: \"Cannot get profile '{profile}': it existed some time "
                'ago but is no longer accessible" (without --enable-profile-reuse, Batsim drops '
                "a profile's name once a job of it has ended)"
            )

    def _submitter(self, pending: PendingJobs) -> Iterator[Simcall]:
        """Batsim's static job submitter of one workload: jobs of one subtime in one
        message, sleeping from one subtime to the next (measured from its last wake-up)."""
        kernel = self.kernel
        latency = self.options.submission_latency
        yield (BY_NAME_THEN, (PUT, self._box, ("hello",), self._local))
        current = kernel.clock
        batch: list[JobRecord] = []
        while pending:
            record = self._held(pending.pop())
            subtime = record.job.subtime + latency
            if subtime > current:
                if batch:
                    yield (BY_NAME_THEN, (PUT, self._box, ("submitted", batch), self._local))
                    batch = []
                yield (SLEEP, subtime - current)
                current = kernel.clock
            if self.energy is not None and self.energy_first_submission is None:
                self.energy_first_submission = self.energy.total(kernel.clock)
            batch.append(record)
        if batch:
            yield (BY_NAME_THEN, (PUT, self._box, ("submitted", batch), self._local))
        yield (BY_NAME_THEN, (PUT, self._box, ("bye",), self._local))

    def _job(self, record: JobRecord) -> Iterator[Simcall]:
        """One job's execution actor (on its first allocated host, so its completion
        reaches the server's host at once): Batsim's ``execute_job_process``, its profile's
        tasks one after the other, the walltime counted down across them."""
        self._start(record)
        if record.slowdown:  # timewarp's extension: one sleep, moved as the rate changes
            yield (SLEEP, record.deadline - self.kernel.clock)
            reached = record.walltime_end is not None and record.deadline == record.walltime_end
        else:
            reached = False
            left = record.job.walltime if record.job.walltime > 0 else -1.0
            for task in self._tasks(record):
                seconds, rate = task.seconds, task.rate
                record.task, record.task_start = task, self.kernel.clock
                if task.ptask is not None:  # Batsim: wait_for(what is left of the walltime)
                    if left > 0:
                        began = self.kernel.clock
                        if (yield (EXEC_TIMEOUT, task.ptask, left)) is TIMED_OUT:
                            reached = True
                            break
                        left -= self.kernel.clock - began
                    else:
                        yield (EXEC, task.ptask)
                    continue
                if rate > 0 and left > 0 and not seconds > left:
                    # a parallel task under the walltime: SimGrid's timeout detector decides
                    # a tie (simulator.kernel, EXEC_TIMEOUT)
                    self._computing(record, task)
                    if (yield (EXEC_TIMEOUT, rate, left)) is TIMED_OUT:
                        reached = True
                        break
                    self._set_loads(record, ())
                    left -= seconds
                # a delay must end before the walltime
                elif left < 0 or seconds < left:
                    if rate > 0:
                        self._computing(record, task)
                        yield (EXEC, rate)
                        self._set_loads(record, ())
                    elif seconds > 0:  # SimGrid: sleeping 0 is no sleep at all
                        yield (SLEEP, seconds)
                    if left > 0:
                        left -= seconds
                else:
                    if rate > 0:  # a parallel task cut by the walltime: computing till then
                        self._computing(record, task)
                    yield (SLEEP, left)
                    reached = True
                    break
        if reached:
            self._complete(record, "COMPLETED_WALLTIME_REACHED", -1)
        else:
            self._complete(record, "COMPLETED_SUCCESSFULLY", 0)
        yield (BY_NAME_THEN, (PUT, self._box, ("completed", record), self._remote[record.hosts[0]]))
        # a parallel task past its walltime computes on until its actor ends (Batsim does
        # not cancel it; SimGrid drops it with the actor)
        self._set_loads(record, ())

    def _tasks(self, record: JobRecord) -> list[_Task]:
        """The job's tasks as Batsim runs them: a delay is a sleep (rate 0), a parallel
        task 1 unit of work at ``rate`` (the slowest host's speed / flops), a composed
        profile's parts in order, ``repeat`` times (``path``: where in which composed
        profile, for JOB_KILLED's progress)."""
        workload = self.workloads[record.job.workload]
        name = record.job.profile
        profile = workload.profiles[name]
        seconds = plain_delay(profile)
        if seconds is not None:  # one sleep, no walk through the profile
            return [_Task(seconds, 0.0, name, ())]
        hosts = record.hosts
        speeds = [self._speeds[h] for h in hosts]
        classes = [self._classes[h] for h in hosts]
        tasks: list[_Task] = []

        def add(name: str, path: tuple[tuple[str, int], ...]) -> None:
            profile = workload.profiles[name]
            if profile["type"] == "composed":
                parts = profile["seq"]
                for repetition in range(int(profile.get("repeat", 1))):
                    for index, part in enumerate(parts):  # Batsim counts across repeats
                        add(part, (*path, (name, repetition * len(parts) + index)))
                return
            seconds = base_duration(name, workload.profiles, speeds, classes)
            rate = 0.0
            if has_communication(profile) or profile["type"] == "parallel":
                tasks.append(self._ptask_task(record, name, profile, path))
                return
            if profile["type"] == "parallel_homogeneous_total":
                profile = {"type": "parallel_homogeneous", "cpu": profile["cpu"] / len(hosts)}
            if profile["type"] == "parallel_homogeneous" and profile["cpu"] > 0:
                if not (profile.get("timewarp") or {}).get("durations"):
                    rate = min(speed / profile["cpu"] for speed in speeds)
            tasks.append(_Task(seconds, rate, name, path))

        add(record.job.profile, ())
        return tasks

    def _computing(self, record: JobRecord, task: _Task) -> None:
        """-E: a task computing at ``task.rate`` puts that many tasks/s × its flops on
        each host (the energy plugin's load)."""
        if self.energy is None:
            return
        profile = self.workloads[record.job.workload].profiles[task.name]
        hosts = record.hosts
        flops = ptask_matrices(profile, len(hosts))[0]
        self._set_loads(
            record, tuple((h, task.rate * f) for h, f in zip(hosts, flops, strict=True))
        )

    def _set_loads(self, record: JobRecord, loads: tuple[tuple[int, float], ...]) -> None:
        if self.energy is None:
            return
        now = self.now
        for host, flops in record.loads:
            self.energy.add_load(host, now, -flops)
        for host, flops in loads:
            self.energy.add_load(host, now, flops)
        record.loads = loads

    def _energy_row(self, kind: str) -> float:
        """A row of _consumed_energy.csv (Batsim's energy tracer); the total energy."""
        assert self.energy is not None
        total = self.energy.exact_total(self.now)
        self.energy_rows.append((self.now, total, kind, self.energy.wattmin()))
        return float(total)

    def _ptask_task(
        self, record: JobRecord, name: str, profile: dict[str, Any], path: tuple
    ) -> _Task:
        """A parallel task with its communications: SimGrid's ptask on the job's hosts."""
        hosts = record.hosts
        if profile["type"] == "parallel" and len(profile["cpu"]) != len(hosts):
            raise DecisionError(
                f"job {record.job.job_id!r}: profile {name!r} is for {len(profile['cpu'])} "
                f"hosts, the allocation has {len(hosts)} (Batsim aborts: 'the number of "
                "resources given by the allocation is different')"
            )
        flops, matrix = ptask_matrices(profile, len(hosts))
        compute = self.platform.compute
        described = [
            (compute[h].name, compute[h].speed, compute[h].cores, ("cpu", h)) for h in hosts
        ]
        latency, elements, bound, capacity = ptask_spec(
            self.platform.network, described, flops, matrix
        )
        if self.kernel.constraints is not None:
            self.kernel.share(capacity)
        alone = bound
        for cid, weight in elements:
            if weight > 0:
                share = capacity[cid][0] / weight
                alone = share if alone <= 0 else min(alone, share)
        spec = Ptask(latency, tuple(elements), bound, alone)
        return _Task(-1.0, alone if alone > 0 else 1.0, name, path, spec)

    def _kill_progress(self, record: JobRecord) -> dict[str, Any]:
        """JOB_KILLED's progress of a running job, Batsim's way: the current task's share
        done (a composed profile wraps it with ``current_task_index``/``current_task``)."""
        task = record.task
        if record.slowdown or task is None:  # timewarp's sharing slowdown: the whole job
            self._settle(record)
            done = 1.0 if record.work == 0 else 1.0 - record.remaining / record.work
            return {"profile_name": record.job.profile, "progress": p.wire_time(done)}
        action = record.actor.action if record.actor is not None else None
        if task.rate > 0 and action is not None:
            done = 1.0 - action.remaining
        else:
            elapsed = self.now - record.task_start
            done = 1.0 if task.seconds <= 0 else elapsed / task.seconds
        progress: dict[str, Any] = {
            "profile_name": task.name,
            "progress": p.wire_time(min(1.0, max(0.0, done))),
        }
        for composed, index in reversed(task.path):
            progress = {
                "profile_name": composed,
                "current_task_index": index,
                "current_task": progress,
            }
        return progress

    def _waiter(self, target: float) -> Iterator[Simcall]:
        """A CALL_ME_LATER's actor (Batsim sleeps at least WAITER_MIN_SLEEP_S)."""
        now = self.kernel.clock
        if now < target:
            yield (SLEEP, max(target - now, WAITER_MIN_SLEEP_S))
        if self._end_sent or self._ack:
            return
        yield (BY_NAME_THEN, (PUT, self._box, ("waiting_done",), self._local))

    def _killer(self, records: list[JobRecord]) -> Iterator[Simcall]:
        progress: dict[str, dict[str, Any]] = {}
        killed = []
        for record in records:
            if record.state == "running":
                progress[record.job.job_id] = self._kill_progress(record)
                # Batsim cancels a parallel task (its job returns -2), kills the actor of
                # anything else (the return code stays -1)
                code = -2 if record.task is not None and record.task.rate > 0 else -1
                yield (KILL, record.actor)
                self._set_loads(record, ())  # its parallel task is cancelled
                self._complete(record, "COMPLETED_KILLED", code)
                killed.append(record)
        yield _BY_NAME
        yield (
            PUT,
            self._box,
            ("killing_done", [r.job.job_id for r in records], progress, killed),
            self._local,
        )

    # ------------------------------------------------------------------ the server's handlers

    def _on_decision(self, message: tuple) -> Iterator[Simcall]:
        _, index, event = message
        try:
            yield from self._apply(event)
        except DecisionError as exc:
            raise DecisionError(
                f"reply events[{index}] ({event.type}) at {p.wire_time(self.now)}: {exc}"
            ) from None

    def _on_message(self, message: tuple) -> None:
        """Every message to the server but a decision (which may start actors)."""
        kind = message[0]
        if kind == "completed":
            self._report_end(message[1])
        elif kind == "ready":
            self._sched_ready = True
            if self._end_sent:
                self._ack = True
        elif kind == "submitted":
            for record in message[1]:
                self._submit(record)
        elif kind == "waiting_done":
            self.pending_calls -= 1
            self._emit(p.RequestedCall())
        elif kind == "killing_done":
            _, job_ids, progress, killed = message
            for record in killed:
                self._report_end(record)
            self.killers -= 1
            self._emit(p.JobKilled(job_ids, progress))
        elif kind == "switched":  # Batsim's server_on_switched
            assert self.power is not None
            self.power.switches.in_flight -= 1
            if self._switch_done(message[1], message[2]):
                self._machine_row()
        elif kind == "bye":
            self._submitters_done += 1
            if self._submitters_done == self._submitters:
                self.static_done = True
                self._emit(p.Notify("no_more_static_job_to_submit"))
        # "hello": nothing to do

    def _emit(self, payload: p.Payload) -> None:
        # stamped with the time as Batsim prints it (%f), the only form a message carries
        self._writer.append(p.Event(p.wire_time(self.kernel.clock), payload))

    def _submit(self, record: JobRecord) -> None:
        record.state = "submitted"
        # Batsim's jobs.csv counts from the job's subtime, not from when its submission
        # reached the server (a network's time later); timewarp's latency is part of it
        record.submission_time = record.job.subtime + self.options.submission_latency
        self.unfinished += 1
        profile = None
        if self.options.forward_profiles:
            profile = self._profiles_json(record.job.workload)[record.job.profile]
        self._emit(p.JobSubmitted(record.job.job_id, p.wire_value(record.job.raw), profile))

    def _profiles_json(self, workload: str) -> dict[str, dict[str, Any]]:
        """A workload's profiles as Batsim forwards them: floats printed with ``%f``, and
        only those a job uses."""
        cached = self._profiles_cache.get(workload)
        if cached is None:
            cached = self._profiles_cache[workload] = p.wire_value(
                self.workloads[workload].profiles
            )
        return cached

    def _report_end(self, record: JobRecord) -> None:
        """The server learns a job ended: jobs.csv row order, counts, JOB_COMPLETED."""
        self._ended_since_send.append(record)
        record.state = "done"
        record.end_seq = self.jobs_ended
        self.jobs_ended += 1
        # the message names the job's allocation, as Batsim's does: taken before streamed
        # outputs let the record forget it
        completed = p.JobCompleted(
            record.job.job_id, record.final_state, record.return_code, record.alloc
        )
        if self._sink is not None:
            self._sink.job_ended(record)
            self._forget(record)
        self.unfinished -= 1
        self.running -= 1
        self._emit(completed)

    def _forget(self, record: JobRecord) -> None:
        """Its row written, an ended job keeps only its state: what the simulation holds
        stays flat in the number of jobs that ended (only with streamed outputs: callers
        that read the records afterwards keep them whole)."""
        record.actor = record.task = record.walltime_end = None
        record.alloc, record.hosts = _NO_RESOURCES, ()
        record.start = record.finish = None
        record.submission_time = record.last_update = record.deadline = record.task_start = 0.0
        record.work = record.remaining = record.rate = 0.0
        record.start_seq = record.end_seq = -1
        job_id = record.job.job_id
        del self.records[job_id]  # its Job and parsed JSON go with it
        self.ended_jobs.add(job_id, record.state, record.final_state, record.kill_requested)

    def _finished(self) -> bool:
        return (
            self.static_done
            and self.unfinished == 0
            and self.running == 0
            and self.pending_calls == 0
            and self.killers == 0
            and self.registration_finished
            and (self.power is None or self.power.switches.in_flight == 0)
        )

    def _deadlock_text(self) -> str:
        waiting = [
            r.job.job_id
            for r in self.records_in_load_order(self.records.values())
            if r.state == "submitted"
        ]
        parts = [
            f"nothing left to happen at t={p.wire_time(self.now):g} s but the simulation cannot end"
        ]
        if waiting:
            shown = ", ".join(waiting[:5]) + (" …" if len(waiting) > 5 else "")
            parts.append(f"{len(waiting)} submitted job(s) neither executed nor rejected: {shown}")
        if not self.registration_finished:
            parts.append("dynamic jobs are enabled and no NOTIFY registration_finished came")
        return "; ".join(parts)

    # ------------------------------------------------------------------ decisions

    def _held(self, job: Job) -> JobRecord:
        """The record of a static job its submitter pops (built early, or now)."""
        if job.job_id in self._built_early:
            self._built_early.discard(job.job_id)
            return self.records[job.job_id]
        record = self.records[job.job_id] = JobRecord(job)
        return record

    def _is_pending(self, job_id: str) -> bool:
        """A static job still held by its submitter (not yet in ``records``)."""
        return (
            job_id in self._static_ids
            and job_id not in self.records
            and job_id not in self.ended_jobs
        )

    def _build_early(self, job_id: str) -> JobRecord:
        """A decision names a job not yet submitted (an error, or SET_JOB_METADATA): its
        record is built now, kept in ``records`` for its submitter (rare: a scan)."""
        name = job_id.rpartition("!")[0]
        pending = self._pending[self._load_rank[name]]
        job = next(job for job in pending if job.job_id == job_id)
        self._built_early.add(job_id)
        record = self.records[job_id] = JobRecord(job)
        return record

    def _record(self, job_id: str) -> JobRecord:
        record = self.records.get(job_id)
        if record is None and self._is_pending(job_id):
            record = self._build_early(job_id)
        if record is None:
            ended = self.ended_jobs.get(job_id)
            if ended is None:
                raise DecisionError(f"unknown job {job_id!r}")
            # a stand-in with what the decisions' checks read of a forgotten job
            workload, _, local = job_id.rpartition("!")
            job = Job(job_id, workload, local, 0.0, 1, "", -1.0, {}, -1)
            record = JobRecord(job, state=ended[0], final_state=ended[1])
            record.kill_requested = ended[2]
        return record

    def _apply(self, event: p.Event) -> Iterator[Simcall]:
        data = event.data
        if isinstance(data, p.ExecuteJob):
            record = self._execute(data)
            record.actor = yield (CREATE, self._job(record), "job")
        elif isinstance(data, p.RejectJob):
            record = self._record(data.job_id)
            self._require_submitted(record, "reject")
            self._ended_since_send.append(record)
            record.state = "rejected"
            record.final_state = "REJECTED"
            record.end_seq = self.jobs_ended
            self.jobs_ended += 1
            if self._sink is not None:
                self._sink.job_ended(record)
                self._forget(record)
            self.unfinished -= 1
        elif isinstance(data, p.KillJob):
            records = self._to_kill(data.job_ids)
            if records:
                self.killers += 1
                yield (CREATE, self._killer(records), "killer_process")
        elif isinstance(data, p.CallMeLater):
            if not data.timestamp > self.now:
                raise DecisionError(
                    f"CALL_ME_LATER at {data.timestamp} is not strictly after the current "
                    f"time {self.now!r} (Batsim aborts: 'You asked to be awaken in the past!')"
                )
            self.pending_calls += 1
            yield (CREATE, self._waiter(data.timestamp), "waiter")
        elif isinstance(data, p.SetJobMetadata):
            self._record(data.job_id).metadata = data.metadata
        elif isinstance(data, p.SetResourceState) and self.power is not None:
            yield from self._switch_request(data)
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
                answers[key] = 0.0 if self.energy is None else self.energy.total(self.now)
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

    def _switch_request(self, data: p.SetResourceState) -> Iterator[Simcall]:
        """Batsim's ``server_on_pstate_modification`` (-E): computation → computation at
        once, to or from a sleep state by a switching actor per machine."""
        power, energy = self.power, self.energy
        assert power is not None and energy is not None
        machines = data.resources
        if machines.max >= self.nb_compute:
            raise DecisionError(
                f"resource {machines.max} is not a compute machine (0-{self.nb_compute - 1})"
            )
        try:
            target = power.check_request(machines, data.state, self.host_jobs)
        except ValueError as exc:
            raise DecisionError(f"SET_RESOURCE_STATE {machines} to {data.state!r}: {exc}") from None
        now = self.now
        power.switches.request(now, machines, target, power.kind(machines.min, target))
        self._energy_row("p")
        for machine in machines:
            if power.kind(machine, power.current[machine]) == ASLEEP:
                self._machine_update(machine, "switching_on")
            elif power.kind(machine, target) == ASLEEP:
                self._machine_update(machine, "switching_off")
            else:  # computation → computation: at once
                self._set_pstate(machine, target)
                self._switch_done(machine, target)
                continue
            power.switches.in_flight += 1
            yield (CREATE, self._switcher(machine, target), "switch")
        self._machine_row()

    def _switcher(self, machine: int, target: int) -> Iterator[Simcall]:
        """Batsim's ``switch_on/off_machine_process``, on the machine's host: into the
        virtual state, 1 flop there, into the target state, then tell the server."""
        power, energy = self.power, self.energy
        assert power is not None and energy is not None
        self._set_pstate(machine, power.virtual(machine, target))
        speed = power.speeds[machine][power.current[machine]]
        energy.add_load(machine, self.now, speed)  # one core computing
        yield (EXEC, speed)  # 1 flop at the virtual state's speed
        energy.add_load(machine, self.now, -speed)
        self._set_pstate(machine, target)
        self._machine_update(
            machine, "sleeping" if power.kind(machine, target) == ASLEEP else "idle"
        )
        yield (BY_NAME_THEN, (PUT, self._box, ("switched", machine, target), self._remote[machine]))

    def _set_pstate(self, machine: int, pstate: int) -> None:
        assert self.power is not None and self.energy is not None
        self.power.current[machine] = pstate
        self._speeds[machine] = self.power.speeds[machine][pstate]
        self.energy.set_pstate(machine, pstate, self.now)

    def _switch_done(self, machine: int, target: int) -> bool:
        """``mark_switch_as_done``: when the machine was its request's last, the traces'
        rows and RESOURCE_STATE_CHANGED (True)."""
        assert self.power is not None
        machines = self.power.switches.done(self.now, machine, target)
        if machines is None:
            return False
        self._energy_row("p")
        self._emit(p.ResourceStateChanged(machines, str(target)))
        return True

    def _require_submitted(self, record: JobRecord, verb: str) -> None:
        state = record.state
        if state == "submitted":
            return
        why = {
            "pending": f"it is not submitted yet (subtime {record.job.subtime})",
            "running": f"it is already running since {record.start} (executed twice?)",
            "completed": f"it already finished ({record.final_state})",
            "done": f"it already finished ({record.final_state})",
            "rejected": "it was rejected",
        }[state]
        raise DecisionError(f"cannot {verb} job {record.job.job_id!r}: {why}")

    def _execute(self, data: p.ExecuteJob) -> JobRecord:
        record = self._record(data.job_id)
        self._require_submitted(record, "execute")
        alloc = data.alloc
        hosts = p.procset_tuple(alloc)
        if hosts and hosts[-1] >= self.nb_compute:
            raise DecisionError(
                f"alloc {alloc}: resource {alloc.max} is not a compute resource "
                f"(compute resources: 0-{self.nb_compute - 1})"
            )
        if data.mapping is None and len(hosts) != record.job.res:
            raise DecisionError(
                f"alloc {alloc} has {len(hosts)} resource(s) but job {record.job.job_id!r} "
                f"requests res={record.job.res}"
            )
        if not self.options.allow_compute_sharing:
            for host in hosts:
                if self.host_jobs[host]:
                    raise DecisionError(
                        f"machine {host} is busy with {self.host_jobs[host][0]!r} and compute "
                        "sharing is off (run with --enable-compute-sharing to allow it)"
                    )
        power = self.power
        if power is not None:
            for host in hosts:
                if power.kind(host, power.current[host]) != COMPUTATION:
                    raise DecisionError(
                        f"alloc {alloc}: machine {host} is in power state "
                        f"{power.current[host]}, not a computation one (sleeping or switching; "
                        "Batsim aborts)"
                    )
        record.state = "running"
        record.alloc, record.hosts = alloc, hosts
        self.running += 1
        return record

    def _to_kill(self, job_ids: list[str]) -> list[JobRecord]:
        records = []
        for job_id in job_ids:
            record = self._record(job_id)
            if record.kill_requested:
                continue
            if record.state not in ("running", "completed", "done"):
                raise DecisionError(
                    f"cannot kill job {job_id!r}: it is {record.state}, not running or finished"
                )
            record.kill_requested = True
            if job_id not in self.records:  # a stand-in: the flag is the ended jobs'
                self.ended_jobs.kill_requested(job_id)
            records.append(record)
        return records

    def _register_profile(self, data: p.RegisterProfile) -> None:
        if not self.options.dynamic_jobs:
            raise DecisionError("REGISTER_PROFILE needs dynamic jobs (--enable-dynamic-jobs)")
        workload = self.workloads.get(data.workload_name)
        if workload is None:
            workload = Workload(data.workload_name, "dynamic", [], {})
            self.workloads[data.workload_name] = workload
        if (data.workload_name, data.profile_name) in self._removed_profiles:
            raise DecisionError(
                f'REGISTER_PROFILE {data.profile_name!r}: Batsim: "Cannot get profile '
                f"'{data.profile_name}': it existed some time ago but is no longer accessible\" "
                "(a dropped profile cannot be registered again)"
            )
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
        self._profiles_cache.pop(data.workload_name, None)

    def _register_job(self, data: p.RegisterJob) -> None:
        if not self.options.dynamic_jobs:
            raise DecisionError("REGISTER_JOB needs dynamic jobs (--enable-dynamic-jobs)")
        if self.registration_finished:
            raise DecisionError("REGISTER_JOB after NOTIFY registration_finished")
        name = data.job_id.split("!", 1)[0]
        workload = self.workloads.get(name)
        if workload is None:
            raise DecisionError(f"job {data.job_id!r}: no workload {name!r} (register a profile)")
        if (
            data.job_id in self.records
            or data.job_id in self.ended_jobs
            or self._is_pending(data.job_id)
        ):
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
                self._job_counts.get(name, 0),
                id_has_prefix=True,
            )
        except WorkloadError as exc:
            raise DecisionError(f"REGISTER_JOB {data.job_id!r}: {exc}") from None
        self._job_counts[name] = self._job_counts.get(name, 0) + 1
        record = JobRecord(job)
        self.records[job.job_id] = record
        if self.options.acknowledge_dynamic_jobs:
            self._submit(record)
        else:
            record.state = "submitted"
            record.submission_time = record.job.subtime
            self.unfinished += 1

    # ------------------------------------------------------------------ execution model

    def _start(self, record: JobRecord) -> None:
        """A job actor begins: its start time, its machines, its end (and walltime)."""
        hosts = record.hosts
        workload = self.workloads[record.job.workload]
        profile = workload.profiles[record.job.profile]
        now = self.now
        record.start = now
        record.start_seq = next(self._start_counter)
        work = plain_delay(profile)
        if work is None:
            work = base_duration(
                record.job.profile,
                workload.profiles,
                [self._speeds[h] for h in hosts],
                [self._classes[h] for h in hosts],
            )
        record.work = record.remaining = work
        record.last_update = now
        if self.energy is not None:  # Batsim: before the job's machines are marked busy
            record.energy = self.energy.on(hosts, now)
            self._energy_row("s")
        record.slowdown = has_sharing_slowdown(profile)
        self._slowdown_running += record.slowdown
        record.walltime_end = now + record.job.walltime if record.job.walltime > 0 else None
        affected = self._sharing_jobs(hosts)
        for other in affected:
            self._settle(other)
        for host in hosts:
            self.host_jobs[host].append(record.job.job_id)
            self._machine_update(host, "computing")
        self._machine_row()  # one row per job start, whatever its number of machines
        record.rate = self._rate(record)
        record.deadline = self._deadline(record)
        for other in affected:
            self._reschedule(other)

    def _deadline(self, record: JobRecord) -> float:
        """When the job actor wakes: its end (exact: start + work without slowdown), or
        its walltime if that comes first (Batsim: a delay not below the walltime is cut)."""
        if record.slowdown:
            end = self.now + record.remaining / record.rate
        else:
            end = record.start + record.work
        if record.walltime_end is not None and not end < record.walltime_end:
            return record.walltime_end
        return end

    def _sharing_jobs(self, hosts: tuple[int, ...]) -> list[JobRecord]:
        """Running jobs with sharing slowdown on ``hosts``, in start order."""
        if not self._slowdown_running:
            return []
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
        return 1.0 / max(len(self.host_jobs[h]) for h in record.hosts)

    def _settle(self, record: JobRecord) -> None:
        record.remaining = max(
            0.0, record.remaining - record.rate * (self.now - record.last_update)
        )
        record.last_update = self.now

    def _reschedule(self, record: JobRecord) -> None:
        rate = self._rate(record)
        if rate != record.rate:
            record.rate = rate
            record.deadline = self._deadline(record)
            if record.actor is not None and self.kernel.pending_sleep(record.actor) is not None:
                self.kernel.retarget(record.actor, record.deadline)

    def _complete(self, record: JobRecord, state: str, return_code: int) -> None:
        """The job actor (or its killer) ends the job: machines, sharing, final state.
        The server reports it when the completion reaches it."""
        hosts = record.hosts
        record.state = "completed"
        record.finish = self.now
        if self.energy is not None:
            record.energy = self.energy.on(hosts, self.now) - record.energy
            self.energy_last_completion = self._energy_row("e")
        record.final_state = state
        record.return_code = return_code
        affected = [r for r in self._sharing_jobs(hosts) if r is not record]
        self._slowdown_running -= record.slowdown
        for other in affected:
            self._settle(other)
        for host in hosts:
            jobs = self.host_jobs[host]
            jobs.remove(record.job.job_id)
            self._machine_update(host, "computing" if jobs else "idle")
        self._machine_row()  # one row per job end
        for other in affected:
            self._reschedule(other)

    def _machine_update(self, host: int, new: str) -> None:
        """Batsim's ``update_machine_state``: the time since the machine's last change
        credited to the state it leaves (only then: schedule.csv's times stop at each
        machine's last change)."""
        old = self.machine_state[host]
        now = _LONG_ZERO + self.kernel.clock
        self.machines.spent[host][old] += now - self.machine_since[host]
        self.machine_since[host] = now
        if old != new:
            self.machine_state[host] = new
            self.nb_in_state[old] -= 1
            self.nb_in_state[new] += 1

    def _machine_row(self) -> None:
        """A machine_states.csv row: how many machines are in each state now."""
        row = (self.now, *self.nb_in_state.values())
        if self._sink is not None:
            self._sink.machine_row(*row)
        else:
            self.machines.rows.append(row)


def _used_profiles(workload: Workload) -> set[str]:
    """The profiles a workload's jobs use, with the parts of the composed ones they use.
    (Batsim also keeps some parts of an unused composed profile: which depends on its hash
    table's order — a documented difference.)"""
    used: set[str] = set()
    todo = [job.profile for job in workload.jobs]
    while todo:
        name = todo.pop()
        if name not in used and name in workload.profiles:
            used.add(name)
            todo.extend(workload.profiles[name].get("seq", []))
    return used


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
