"""The broker: Batsim's decision process on one side, the scheduler's cluster on the other.

Deterministic mode, for each message Batsim sends (``now`` = t):

1. timers due before t are released at their own deadlines (time advances to each);
2. virtual time advances to t, Batsim's events are applied to the cluster (nodes, pods,
   completions), metrics are refreshed;
3. timers due at t are released one owner at a time; the broker waits until every
   scheduler process is quiescent, lets the kubelet model admit what was bound meanwhile,
   and repeats until nothing is left to do at t;
4. the reply carries the decisions made at t (EXECUTE_JOB / REJECT_JOB / KILL_JOB, stamped
   t) and a CALL_ME_LATER for the earliest pending timer not already requested.

"Due at t" is Batsim's notion of time, not the nanosecond's: Batsim prints every time to
the microsecond, so a timer whose deadline prints as t (``protocol.instant_end_ns``) is
due now (time advances to it within the instant), and a REQUESTED_CALL answers the
earliest CALL_ME_LATER sent, whatever time it prints (a call asked for 0.3333333333 comes
back stamped 0.333333). Without that, a timer below the microsecond was never released.

Time never moves while a scheduler thread runs, so the same inputs give the same
decisions, byte for byte. Once every static job was submitted and every Batsim job (static
or dynamic: REGISTER_JOB for controller-made pods, see ``broker.cluster.cluster``) has ended, no
more calls are requested, NOTIFY ``registration_finished`` goes out when dynamic jobs are
enabled, and Batsim can end the simulation.
"""

from __future__ import annotations

import os
import sys
import threading
import time as _wall
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import zmq

from broker.clock.service import ClockService, ClockStall
from broker.cluster.cluster import Cluster
from broker.cluster.declared import create_declared
from broker.cluster.traffic_driver import TrafficDriver
from broker.controllers.registry import TERMINATED_POD_GC
from broker.controllers.terminated_gc import DEFAULT_THRESHOLD
from broker.drivers.batsim_socket import bind_rep
from broker.facade import Facade
from broker.processes.launcher import Launcher, SchedulerFailed
from simulator import local_link
from simulator import protocol as p
from simulator.traffic.spec import ServiceSpec

SIMULATOR_REASON_S = 30.0  # how long a hosted simulator's watcher may take to say why it ended
# a first submission later than its subtime by more than the two times' printing (each
# rounded to the microsecond) took network time (see Broker._check_network)
NETWORK_SEEN_S = 1.5e-6


@dataclass
class Progress:
    now_s: float = 0.0
    jobs_submitted: int = 0
    jobs_done: int = 0
    jobs_dynamic: int = 0  # registered by the broker (controller-made pods)
    messages: int = 0


@dataclass
class BrokerResult:
    ok: bool
    reason: str = ""
    messages: int = 0
    virtual_s: float = 0.0
    stats: dict = field(default_factory=dict)
    scheduler_failed: bool = False  # a scheduler process died or deadlocked: the first cause


class BatsimProtocolError(RuntimeError):
    pass


class SimulatorInputError(RuntimeError):
    """The simulator's inputs declare something this broker cannot run as declared."""


class SimulatorExited(RuntimeError):
    """The simulator ended before the simulation did; the text is its own reason."""


class Broker:
    def __init__(
        self,
        *,
        endpoint: str,
        clock: ClockService,
        facade: Facade,
        launcher: Launcher,
        log: TextIO | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        batsim_timeout_s: float | None = None,
        services: Sequence[ServiceSpec] = (),
        declared: Sequence[tuple[str, dict]] = (),
        terminated_pod_gc_threshold: int = DEFAULT_THRESHOLD,
        reply_transit: p.ReplyTransit = p.NO_NETWORK,
        sock: zmq.Socket | None = None,
    ) -> None:
        """``sock``: a REP socket already bound (``endpoint`` then only names it)."""
        self.clock = clock
        # what each event of a reply costs on its way to Batsim's server (the platform's
        # network, once per run): a CALL_ME_LATER asks for a time after all of them
        self.reply_transit = reply_transit
        # False: timewarp broker was not told the platform Batsim runs (--platform); the
        # first submission then tells whether its messages take network time (a warning)
        self.platform_known = True
        self._network_checked = False
        # the CRDs and custom resources the workloads declare (checked), created at
        # SIMULATION_BEGINS before the services' objects (broker/cluster/declared.py)
        self.declared = list(declared)
        self.facade = facade
        self.launcher = launcher
        self.log = log or sys.stderr
        self.on_progress = on_progress
        self.batsim_timeout_s = batsim_timeout_s
        self.ended = False  # SIMULATION_ENDS answered: the simulator may exit now
        # called once the cluster exists (SIMULATION_BEGINS applied): the command's
        # process tunes its heap there, before the first pod (commands/simulating/heap.py)
        self.after_begin: Callable[[], None] | None = None
        self._simulator_exit: str | None = None
        self._exited = threading.Event()
        self.cluster = Cluster(
            facade, lambda: clock.now_ns, terminated_pod_gc_threshold=terminated_pod_gc_threshold
        )
        # the workload's services with traffic (docs/services.md)
        self.services = TrafficDriver(services, facade.store, facade.clock) if services else None
        self.cluster.services = self.services
        # timewarp broker: the services are those of the workload files the simulator
        # names in SIMULATION_BEGINS (this broker never saw its command line)
        self.services_from_simulator = False
        if clock.mode == "deterministic":
            # the broker's reactions happen while a scheduler is still busy, not while it
            # waits to be let go to read them
            self.cluster.admit_bindings_at_once()
            facade.write_watch_events_directly()
        self.progress = Progress()
        self._requested: dict[int, float] = {}  # deadline ns -> CALL_ME_LATER timestamp sent
        self._instant_end_ns = 0  # timers up to this are due at the current message
        self._ctx = zmq.Context.instance()
        # the embedded simulator in this process: message objects, no JSON nor socket
        self._link = local_link.bind(endpoint) if endpoint.startswith(local_link.SCHEME) else None
        if sock is not None:  # bound by the command before anything started
            self._sock, self.endpoint = sock, sock.getsockopt_string(zmq.LAST_ENDPOINT)
        elif self._link is not None:
            self._sock = self._ctx.socket(zmq.REP)
            self._sock.setsockopt(zmq.LINGER, 0)
            self.endpoint = endpoint
        else:
            self._sock, self.endpoint = bind_rep(endpoint)
        clock.quiescence.set_io_checker(
            facade.connection_state, facade.connection_written, facade.connection_states
        )
        clock.quiescence.set_before_io_release(
            self._process_cluster, pending=lambda: self.cluster.process_pending()
        )
        facade.add_idle_listener(lambda _port: clock.notify())

    # ------------------------------------------------------------------ loop
    def run(self) -> BrokerResult:
        try:
            if self._link is not None and self._link.guest is not None:
                self._host_simulator()
                return self._result(True)
            while True:
                frame = self._receive()
                if type(frame) is p.Message:
                    message = frame
                else:
                    try:
                        message = p.decode(frame, "batsim")
                    except p.ProtocolError as exc:
                        raise BatsimProtocolError(f"malformed message from Batsim: {exc}") from exc
                ends = self.ended_by(message)
                reply = self._answer(message)
                if self._link is not None:
                    self._link.send(reply)
                else:
                    self._sock.send_string(p.encode(reply))
                if ends:
                    return self._result(True)
        except SchedulerFailed as exc:
            result = self._result(False, str(exc))
            result.scheduler_failed = True
            return result
        except ClockStall as exc:
            return self._result(False, f"stopped by the stall guard:\n{exc}")
        except (BatsimProtocolError, SimulatorExited, SimulatorInputError) as exc:
            return self._result(False, str(exc))

    def _check_network(self, message: p.Message) -> None:
        """Without the platform: Batsim's first submission arrives a message's time after
        its subtime (one or two local messages: the submitter's hello may go first),
        printed to the microsecond like the subtime. More than that rounding says the
        master host's messages take network time, which the CALL_ME_LATER rule does not
        know: warn once (a route faster than a microsecond goes unseen)."""
        for event in message.events:
            if not isinstance(event.data, p.JobSubmitted):
                continue
            self._network_checked = True
            subtime = event.data.job.get("subtime")
            if isinstance(subtime, int | float) and event.timestamp - subtime > NETWORK_SEEN_S:
                print(
                    f"broker: warning: job {event.data.job_id} was submitted at {subtime} and "
                    f"arrived at {event.timestamp}: the simulator's messages take network time "
                    "on its platform, and without --platform the broker's CALL_ME_LATER "
                    "assumes they take none (Batsim may abort: 'You asked to be awaken in the "
                    "past!'); give timewarp broker --platform FILE (and --master-host NAME)",
                    file=self.log,
                    flush=True,
                )
            return

    def explain_exit(self, reason: str) -> str:
        """A simulator's last words, with the broker's side when they are a refused
        CALL_ME_LATER (real Batsim: "You asked to be awaken in the past!"; the embedded
        simulator quotes it): what the broker allowed for its reply's events, and why
        that was not enough."""
        if "awaken in the past" not in reason:
            return reason
        if not self.platform_known:
            why = (
                "the broker was not given the platform Batsim runs, and its master host's "
                "route takes network time: give timewarp broker --platform (and --master-host)"
            )
        else:
            why = (
                "the reply's events took longer to reach Batsim's server than that: more "
                f"than {p.OTHER_MESSAGES} messages of other actors (completions, "
                "submissions) reached it first, or a route's link was shared by more than "
                f"{p.SHARED_MESSAGES} messages or by a parallel task's communication "
                "(docs/broker.md, 'CALL_ME_LATER after the reply's network time')"
            )
        return (
            f"{reason} — the broker's CALL_ME_LATER rule allowed "
            f"{self.reply_transit.describe()}; {why}"
        )

    def simulator_exited(self, reason: str) -> None:
        """The simulator's process (or thread) ended, ``reason`` saying how, in its own
        words: before SIMULATION_ENDS no message will come, so the run fails with it at
        once (any thread may call this)."""
        self._simulator_exit = reason
        self._exited.set()

    @property
    def stopped_simulator(self) -> bool:
        """Whether this broker's failure stopped the simulator it hosts (its end is then
        a consequence, not a cause)."""
        return self._link is not None and self._link.failure is not None

    @staticmethod
    def ended_by(message: p.Message) -> bool:
        return any(isinstance(e.data, p.SimulationEnds) for e in message.events)

    def _answer(self, message: p.Message) -> p.Message:
        """The reply to one message, in whichever thread the message came."""
        ends = self.ended_by(message)
        if not self.platform_known and not self._network_checked:
            self._check_network(message)
        reply = self.step(message)
        self.ended = ends
        return reply

    def _host_simulator(self) -> None:
        """The embedded simulator's run in this thread, its messages answered by calls
        (simulator/local_link.py, hosted): the driver and the simulator take turns in
        one thread instead of waking each other, two context switches per message fewer.
        The same messages, in the same order, get the same replies: :meth:`step` decides
        as it does for a message that came from another thread (docs/clock.md)."""
        assert self._link is not None
        failure = self._link.host(self._answer)
        if failure is not None:
            raise failure
        if self.ended:
            return
        # it returned before SIMULATION_ENDS: its reason comes from the one watching it
        if not self._exited.wait(SIMULATOR_REASON_S):
            raise SimulatorExited("the embedded simulator ended before the end of the simulation")
        raise SimulatorExited(self._simulator_exit or "")

    def _receive(self) -> bytes | p.Message:
        """The next message: its bytes from a socket, the object from a local link."""
        waited = 0.0
        while True:
            if self._link is not None:
                if self._link.poll(0.2):
                    return self._link.receive()
            elif self._sock.poll(200):
                return self._sock.recv()
            self.launcher.check()  # a dead scheduler first: the simulator may follow from it
            if self._simulator_exit is not None:
                raise SimulatorExited(self._simulator_exit)
            waited += 0.2
            if self.batsim_timeout_s is not None and waited >= self.batsim_timeout_s:
                raise BatsimProtocolError(
                    f"no message from Batsim for {self.batsim_timeout_s:g} s (is the simulator running?)"
                )

    def step(self, message: p.Message) -> p.Message:
        """Handle one Batsim message; return the reply (see the module docstring)."""
        self.progress.messages += 1
        t = message.now
        t_ns = round(t * 1e9)
        self._instant_end_ns = p.instant_end_ns(t)
        # each REQUESTED_CALL answers the earliest CALL_ME_LATER sent: its deadline is due
        for _ in range(sum(isinstance(e.data, p.RequestedCall) for e in message.events)):
            deadline = min(self._requested, default=None)
            if deadline is not None and p.answers_call(self._requested[deadline], t):
                del self._requested[deadline]
                t_ns = max(t_ns, deadline)
        self._release_until(t_ns)
        self._advance(t_ns)
        with self.cluster.state_lock:
            for event in message.events:
                self._apply(event.data)
            self.cluster.refresh_metrics()
        self._settle()
        with self.cluster.state_lock:
            decisions = self.cluster.take_decisions()
        events = [p.Event(t, d) for d in decisions]
        deadline = self.clock.next_deadline()
        if deadline is not None and not self._exhausted() and deadline not in self._requested:
            # _settle released what is due in this instant: the deadline prints later
            when = max(deadline / 1e9, self.earliest_call(t, len(events)))
            self._requested[deadline] = when
            events.append(p.Event(t, p.CallMeLater(when)))
        self._report_progress()
        return p.Message(t, events)

    def earliest_call(self, now: float, events: int) -> float:
        """The earliest CALL_ME_LATER time Batsim accepts after ``events`` other events of
        a reply stamped ``now``, on this run's platform (``protocol.earliest_call``)."""
        return p.earliest_call(now, events, self.reply_transit)

    def free_running_call(
        self, sent_now: float, now: float, events: int, wanted: float
    ) -> tuple[float, float, bool]:
        """Lockstep's and realtime's CALL_ME_LATER for ``wanted``, on this run's platform
        (``protocol.free_running_call``): its time, its stamp, whether it goes first."""
        return p.free_running_call(sent_now, now, events, wanted, self.reply_transit)

    @staticmethod
    def add_call(events: list[p.Event], when: float, stamp: float, first: bool) -> None:
        """Put a CALL_ME_LATER for ``when`` in a reply's ``events`` (:meth:`free_running_call`),
        first or last, its stamp never after the next event's (stamps do not decrease)."""
        if not first:
            events.append(p.Event(stamp, p.CallMeLater(when)))
        else:
            events.insert(
                0, p.Event(min([stamp, *(e.timestamp for e in events[:1])]), p.CallMeLater(when))
            )

    def _begin_first(self, message: p.Message) -> list[p.Event]:
        """Apply the SIMULATION_BEGINS of the first message now, so that the cluster
        exists while the schedulers are awaited (they may list the nodes once, at start);
        returns the message's other events."""
        rest = []
        for event in message.events:
            if isinstance(event.data, p.SimulationBegins):
                with self.cluster.state_lock:
                    self._apply(event.data)
            else:
                rest.append(event)
        return rest

    def _exhausted(self) -> bool:
        return self.cluster.all_done()

    def _apply(self, data: object) -> None:
        if isinstance(data, p.SimulationBegins):
            if self.services_from_simulator and self.services is None:
                self._adopt_services(data)
            if self.declared:
                # checked before: a refusal now is the broker's bug, said as it is
                create_declared(self.facade.store, self.declared)
            self.cluster.begin(data)
            if self.facade is not None:
                self.facade.cluster_ready()  # the nodes exist: held requests go on
            if self.after_begin is not None:
                self.after_begin()
        elif isinstance(data, p.JobSubmitted):
            self.cluster.submit(data)
        elif isinstance(data, p.JobCompleted):
            self.cluster.complete(data)
        elif isinstance(data, p.Notify):
            if data.type == "no_more_static_job_to_submit":
                self.cluster.all_submitted = True
        # JOB_KILLED follows a JOB_COMPLETED(COMPLETED_KILLED): nothing more to do;
        # REQUESTED_CALL only moved time; SIMULATION_ENDS ends the loop.

    def _adopt_services(self, data: p.SimulationBegins) -> None:
        """The services of the workload files SIMULATION_BEGINS names, checked and run
        as ``timewarp simulate`` does. A file this process cannot open is said, not
        fatal (real Batsim names it as it was given, relative to its own directory)."""
        from broker.cluster.declared import DeclaredError, check_declared
        from broker.cluster.input_check import InputError, check_services, node_views
        from simulator.traffic.spec import declared_twice
        from simulator.workload import WorkloadError, read_declared_objects, read_services

        specs: list[ServiceSpec] = []
        declared: list[tuple[str, dict]] = []
        for name, path in sorted(data.workloads.items()):
            if not os.path.isfile(path):
                print(
                    f"broker: note: workload {name}: cannot open {path!r} from here to read "
                    "the services it may declare; none are run (give the simulator its "
                    "absolute path)",
                    file=self.log,
                )
                continue
            try:
                specs += read_services(path)
                declared += read_declared_objects(path)
            except WorkloadError as exc:
                raise SimulatorInputError(f"workload {name}: {exc}") from None
        twice = declared_twice(specs)
        if twice is not None:
            raise SimulatorInputError(f"service {twice!r} is declared in more than one workload")
        hosts = ((str(r.get("name", r["id"])), r.get("properties") or {})
                 for r in data.compute_resources)  # fmt: skip
        try:
            check_services(specs, node_views(hosts, "SIMULATION_BEGINS"))
        except InputError as exc:
            raise SimulatorInputError(str(exc)) from None
        try:
            check_declared(declared)
        except DeclaredError as exc:
            raise SimulatorInputError(str(exc)) from None
        self.declared = declared
        if specs:
            self.services = TrafficDriver(specs, self.facade.store, self.facade.clock)
            self.cluster.services = self.services

    def _advance(self, t_ns: int) -> None:
        if t_ns > self.clock.now_ns:
            self.clock.advance_to(t_ns)
            with self.cluster.state_lock:
                self.cluster.refresh_metrics()

    def _release_until(self, t_ns: int) -> None:
        while True:
            deadline = self.clock.next_deadline()
            if deadline is None or deadline >= t_ns:
                return
            self._advance(deadline)
            self._settle()

    def _settle(self) -> None:
        """Run everything due now until the cluster and every scheduler are at rest."""
        while True:
            self.clock.release_due()
            self.clock.wait_quiescent()
            self.launcher.check()
            if self._process_cluster():
                continue
            deadline = self.clock.next_deadline()
            if deadline is not None and deadline <= max(self.clock.now_ns, self._instant_end_ns):
                self._advance(deadline)  # due in this instant: Batsim cannot tell it from now
                continue
            return

    def _process_cluster(self) -> bool:
        began = _wall.monotonic()
        with self.cluster.state_lock:
            did = self.cluster.process()
            if did:
                self.cluster.refresh_metrics()
        actors = self.cluster.last_actors
        if not did or actors is None:  # at rest, or acting on input from outside
            self.clock.stall.broker_at_rest()
        else:
            # the stall guard sees the broker's own busy loop too (controllers acting on
            # nothing but themselves, round after round at one instant): it raises
            # ClockStall, which ends the run with its report
            self.clock.stall.broker_round(self.clock.now_ns, _wall.monotonic() - began, actors)
        return did

    def _report_progress(self) -> None:
        self.progress.now_s = self.clock.now_ns / 1e9
        self.progress.jobs_submitted = self.cluster.stats.jobs_submitted
        self.progress.jobs_done = self.cluster.stats.jobs_done
        self.progress.jobs_dynamic = self.cluster.stats.dynamic_jobs
        if self.on_progress is not None:
            self.on_progress(self.progress)

    def _result(self, ok: bool, reason: str = "") -> BrokerResult:
        stats = dict(vars(self.cluster.stats))
        # every decision wall time made (manifest and summary, one line each): the clock's
        # (StallGuard.count_locked) and requests handled out of their process's order
        # after a wait for a predecessor that never came (broker/facade/sequencer.py)
        causes = list(self.clock.stall.nondeterministic_causes)
        if self.facade is not None:
            causes += self.facade.request_order_causes
        stats["nondeterministic_advances"] = len(causes)
        if causes:
            stats["nondeterministic_causes"] = causes
        stats["timer_fires"] = self.clock.fires
        collected = self.cluster.controllers[TERMINATED_POD_GC].collected
        if collected:  # terminated pods deleted past --terminated-pod-gc-threshold
            stats["pods_garbage_collected"] = collected
        return BrokerResult(ok, reason, self.progress.messages, self.clock.now_ns / 1e9, stats)

    def close(self) -> None:
        if self._link is not None:
            local_link.unbind(self._link)
        self._sock.close(0)


def wall_clock() -> float:
    return _wall.perf_counter()
