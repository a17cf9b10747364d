"""``timewarp sim``: the embedded simulator with batsim's command-line flags.

A script written for Batsim works by swapping the program name::

    timewarp sim -p platform.xml -w workload.json -e out/run --enable-compute-sharing

Exit status: 0 on success; 2 for bad input (arguments, platform, workloads), before any
connection is made, or an ``-s`` where something other than a ZeroMQ peer listens
(another program has the port), without writing outputs; 1 when the decision process breaks the
protocol, deadlocks the simulation or does not answer within ``--reply-timeout``; 143
(SIGTERM) or 130 (SIGINT, Ctrl-C) when stopped from outside; 1 as well when the decision
process disconnects while a reply is awaited (TCP or IPC: it exited; Batsim would wait
forever). A run stopped from outside, by ``--reply-timeout``, a disconnection or a
deadlock still writes *partial* outputs: the jobs that
ended so far and the machine states so far, ``batsim_version`` ending in ``-partial``
(real Batsim writes nothing then). A protocol error writes nothing, as in Batsim.
"""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, TextIO

from simulator import protocol
from simulator.engine import Deadlock, Options, Simulator
from simulator.mixups import input_mixup
from simulator.outputs import StreamingOutputs, write_energy, write_running
from simulator.platform import PlatformError, load_platform, real_batsim_refusals
from simulator.runner import Aborted, Disconnected, ReplyTimeout, print_progress
from simulator.runner import run as run_zmq
from simulator.workload import WorkloadError, load_workload
from simulator.zmtp import NotZeroMQ

if TYPE_CHECKING:  # libzmq is imported only where it is used (not over tcp:// or ipc://)
    import zmq

PROG = "timewarp sim"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-p", "--platform", required=True, help="SimGrid platform XML file")
    parser.add_argument(
        "-w",
        "--workload",
        action="append",
        required=True,
        metavar="WORKLOAD",
        help="workload JSON file (repeatable: w0, w1, … in order)",
    )
    parser.add_argument(
        "-e",
        "--export",
        default="out",
        metavar="PREFIX",
        help="outputs PREFIX_jobs.csv, PREFIX_schedule.csv, PREFIX_machine_states.csv "
        "(default out)",
    )
    parser.add_argument(
        "-s",
        "--socket-endpoint",
        default="tcp://localhost:28000",
        help="the decision process's REP endpoint (default: %(default)s)",
    )
    parser.add_argument(
        "-m",
        "--master-host",
        default="master_host",
        help="the platform's master host, if none has role=master (default master_host)",
    )
    flags = {
        "--enable-compute-sharing": "let several jobs run on one machine at once (off: a "
        "job needs machines of its own; timewarp simulate turns it on)",
        "--disable-storage-sharing": "one job at a time on a storage host",
        "--forward-profiles-on-submission": "send each job's profile with its JOB_SUBMITTED",
        "--enable-dynamic-jobs": "accept jobs and profiles the decision process registers "
        "during the run (REGISTER_JOB, REGISTER_PROFILE); the simulation ends once it "
        "says registration_finished",
        "--acknowledge-dynamic-jobs": "answer each REGISTER_JOB with a JOB_SUBMITTED (needs "
        "--enable-dynamic-jobs)",
        "--enable-profile-reuse": "let REGISTER_PROFILE redefine a profile name already known",
        "--forward-unknown-events": "said in SIMULATION_BEGINS' configuration, as Batsim does "
        "(no event type is unknown to this simulator)",
    }
    for flag, text in flags.items():
        parser.add_argument(flag, action="store_true", help=text)
    parser.add_argument(
        "--sched-cfg",
        default="",
        metavar="TEXT",
        help="a string given to the decision process in SIMULATION_BEGINS (default empty)",
    )
    parser.add_argument(
        "-E",
        "--energy",
        action="store_true",
        help="the hosts' energy (wattage_per_state; sleep_pstates for SET_RESOURCE_STATE's "
        "power-state switches): consumed_energy in jobs.csv, PREFIX_consumed_energy.csv, "
        "PREFIX_pstate_changes.csv",
    )
    parser.add_argument(
        "--submission-latency",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="extra delay between a job's subtime and its JOB_SUBMITTED, as a platform's "
        "network would add in real Batsim (default: %(default)s, Batsim's own timing on a "
        "platform without links)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only warnings and errors (no progress lines, no closing line)",
    )
    parser.add_argument(
        "--reproducible",
        action="store_true",
        help="write wall-clock columns of schedule.csv as 0 (byte-identical outputs)",
    )
    parser.add_argument(
        "--reply-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="give up when a reply takes longer than this many seconds (default: wait "
        "forever, as Batsim does)",
    )
    parser.add_argument(
        "--message-log", metavar="FILE", help="write every message exchanged to FILE"
    )


def _fail(text: str, code: int, err: TextIO | None = None) -> int:
    print(f"{PROG}: {text}", file=err or sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    """The ``timewarp sim`` command, in a process of its own (``timewarp`` runs a command
    then exits; the embedded simulator of ``timewarp simulate`` uses :func:`prepare` and
    :func:`drive`, and leaves its process's collector alone)."""
    sim = prepare(args)
    if isinstance(sim, int):
        return sim
    settle_heap()
    stop = threading.Event()
    with _stop_on_signals(stop) as signals:
        return drive(sim, args, stop=stop, signals=signals)


#: the cyclic collector's gen-0 threshold during a run (Python's default: 700)
GEN0_THRESHOLD = 50_000


def settle_heap() -> None:
    """Python's cyclic GC tuned for the run, once start-up is over (the broker's
    ``commands.simulating.heap`` does the same, for the same reasons): what start-up
    built (modules, the platform, the workload) is collected once then frozen, so the
    run's collections no longer walk it; and the gen-0 threshold is raised, so the
    short-lived containers of each message (events, tuples, generator frames) mostly
    die by reference count before a collection examines them. The run's cycles are
    still collected. Outputs do not depend on it (nothing in the simulator acts on
    finalisation); the 20k-job cluster replay spent 3.9 % of its instructions in the
    collector before."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)


def prepare(args: argparse.Namespace, err: TextIO | None = None) -> Simulator | int:
    """The simulator the arguments describe, or the exit code of a bad input (2)."""
    if args.acknowledge_dynamic_jobs and not args.enable_dynamic_jobs:
        return _fail("--acknowledge-dynamic-jobs needs --enable-dynamic-jobs", 2, err)
    if not 0 <= args.submission_latency < 1:
        return _fail("--submission-latency must be within [0, 1) seconds", 2, err)
    if args.reply_timeout is not None and args.reply_timeout <= 0:
        return _fail("--reply-timeout must be > 0", 2, err)
    mixup = input_mixup(args.platform, args.workload)
    if mixup:
        return _fail(mixup, 2, err)
    try:
        platform = load_platform(args.platform, args.master_host)
        workloads = [
            load_workload(path, f"w{index}", len(platform.compute))
            for index, path in enumerate(args.workload)
        ]
    except (PlatformError, WorkloadError) as exc:
        return _fail(str(exc), 2, err)
    for text in real_batsim_refusals(platform):
        print(
            f"{PROG}: note: {text}; accepted here (fix it to run this platform with real Batsim)",
            file=err or sys.stderr,
        )
    options = Options(
        allow_compute_sharing=args.enable_compute_sharing,
        allow_storage_sharing=not args.disable_storage_sharing,
        forward_profiles=args.forward_profiles_on_submission,
        dynamic_jobs=args.enable_dynamic_jobs,
        acknowledge_dynamic_jobs=args.acknowledge_dynamic_jobs,
        profile_reuse=args.enable_profile_reuse,
        forward_unknown_events=args.forward_unknown_events,
        sched_config=args.sched_cfg,
        submission_latency=args.submission_latency,
        energy=args.energy,
    )
    try:
        return Simulator(platform, workloads, options)
    except PlatformError as exc:  # -E on hosts without their power
        return _fail(str(exc), 2, err)


def drive(
    sim: Simulator,
    args: argparse.Namespace,
    *,
    stop: threading.Event,
    signals: list[int] | None = None,
    context: zmq.Context | None = None,
    err: TextIO | None = None,
) -> int:
    """Run ``sim`` against the decision process and write the outputs (partial ones
    when it ends early); returns the exit status. ``stop`` ends the run between
    messages (``signals``: which signal set it, if any). ``context``: a ZeroMQ context
    to share (an ``inproc://`` endpoint in this process)."""
    err = err or sys.stderr
    try:  # rows are written as the simulation goes: memory stays flat in jobs ended
        outputs = StreamingOutputs(args.export, sim.nb_compute)
    except OSError as exc:
        return _fail(f"cannot write outputs with prefix {args.export!r}: {exc}", 2, err)
    sim.stream_to(outputs)
    with ExitStack() as stack:
        stack.callback(outputs.discard)  # whatever was not made final goes
        log = None
        if args.message_log:
            log = stack.enter_context(open(args.message_log, "w", encoding="utf-8"))
        failure = None
        try:
            stats = run_zmq(
                sim,
                args.socket_endpoint,
                reply_timeout=args.reply_timeout,
                message_log=log,
                progress=None if args.quiet else (lambda s, st: print_progress(s, st, err)),
                stop=stop,
                context=context,
                while_waiting=outputs.write_held,
            )
        except NotZeroMQ as exc:  # a wrong -s: no message was exchanged
            return _fail(f"-s {exc}: give the endpoint its decision process binds", 2, err)
        except protocol.ProtocolError as exc:
            # like Batsim, which aborts: a broken reply makes the results meaningless
            return _fail(f"decision process error: {exc}", 1, err)
        except Deadlock as exc:
            failure = (f"deadlock: {exc}", 1)
        except (ReplyTimeout, Disconnected) as exc:
            failure = (str(exc), 1)
        except Aborted as exc:
            signum = signals[0] if signals else signal.SIGTERM
            failure = (f"{signal.Signals(signum).name}: {exc}", 128 + signum)
        if failure is not None:
            text, code = failure
            try:
                paths = outputs.finish(sim.machines_so_far(), 0.0, 0.0, partial=True)
                paths.append(
                    write_running(
                        args.export, sim.records_in_load_order(sim.records.values()), sim.now
                    )
                )
            except OSError as exc:
                return _fail(f"{text}; cannot write partial outputs: {exc}", code, err)
            ended = outputs.sums.jobs
            return _fail(
                f"{text}\n{PROG}: partial outputs written ({ended} of {sim.jobs_count} jobs "
                f"ended by t={sim.now:g} s): {', '.join(str(p) for p in paths)}",
                code,
                err,
            )
        scheduling = 0.0 if args.reproducible else stats.scheduling_time
        simulation = 0.0 if args.reproducible else stats.simulation_time
        try:
            joules, switches = 0.0, (0, 0)
            if sim.energy is not None and sim.power is not None:
                first = sim.energy_first_submission or 0.0
                joules = sim.energy_last_completion - first
                switches = (sim.power.switches.grouped, sim.power.switches.machines)
            outputs.finish(
                sim.machines, scheduling, simulation, consumed_joules=joules, switches=switches
            )
            if sim.energy is not None and sim.power is not None:
                initial = [host.pstate for host in sim.platform.compute]
                write_energy(args.export, sim.energy_rows, initial, sim.power.switches.rows)
        except OSError as exc:
            return _fail(f"cannot write outputs with prefix {args.export!r}: {exc}", 1, err)
    if not args.quiet:
        print(
            f"{PROG}: done at t={sim.now:g} s simulated, {sim.jobs_count} jobs, "
            f"{stats.messages} messages in {stats.simulation_time:.3f} s wall",
            file=err,
        )
    return 0


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[list[int]]:
    """SIGTERM, SIGINT and SIGHUP set ``stop`` (the run then ends between messages and
    writes partial outputs) instead of killing the process; yields the signals received.
    Under ``timewarp`` (whose handlers, ``commands.stopping``, raise the first signal)
    those are back once the run is over, shielded first: a signal after the outputs are
    written is noted, and the exit status stays the run's."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def handler(signum: int, _frame: object) -> None:
        received.append(signum)
        stop.set()

    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {sig: signal.signal(sig, handler) for sig in stops}
    try:
        yield received
    finally:
        for old in previous.values():
            shield = getattr(getattr(old, "__self__", None), "shield", None)
            if shield is not None:  # commands.stopping.StopSignals (a layer above: no import)
                shield()
        for sig, old in previous.items():
            signal.signal(sig, old)
