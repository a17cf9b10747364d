"""``timewarp broker``: the broker alone, for a simulator started by hand (as Batkube
was used: Batsim in one terminal, the broker in another, the scheduler in a third).

    timewarp broker -o out/ --expect sched            # 1. prints what to start next
    source out/sched.env && timewarp run --name sched -- python mysched.py    # 2.
    batsim -p platform.xml -w workload.json -e out/out \\
        --enable-compute-sharing --enable-dynamic-jobs -s tcp://127.0.0.1:28000     # 3.

The broker binds Batsim's socket (``-s``, default ``tcp://127.0.0.1:28000``, Batsim's own
default port) and serves the Kubernetes API; the simulator — real Batsim, ``timewarp
sim``, anything that speaks Batsim's protocol, under a debugger if need be — connects
when started. Schedulers are either launched by the broker (``--scheduler CMD``, as in
``timewarp simulate``) or started by hand (``--expect NAME``: the broker writes
``NAME.kubeconfig`` and ``NAME.env`` in ``-o`` and waits for ``NAME`` to connect before
time moves). Everything else is ``timewarp simulate``'s: modes, the stall guard, the
no-progress report, ``--until``, the manifest and summary, signals. The simulator's CSVs
are where its ``-e`` prefix says; with ``-e OUT/out`` the summary reads them. Services
with traffic (``docs/services.md``) are read from the workload files the simulator names
in SIMULATION_BEGINS (a path this process cannot open is said, and its services are not
run), and run as ``timewarp simulate`` runs them: ``out_services.csv`` in ``-o``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading
from pathlib import Path

from commands.outfiles import OutputDirError, check_output_dir, write_text_atomically
from commands.run import ENV_EXIT_FILE
from commands.simulating.options import add_run_arguments
from commands.simulating.outputs import OUT_FILES, OUT_PREFIX
from commands.simulating.simulation import Simulation, Wiring
from timewarp.wire import clockproto

DEFAULT_ENDPOINT = "tcp://127.0.0.1:28000"
#: What the broker does without --platform, said at start.
NO_PLATFORM_NOTE = (
    "timewarp broker: note: no --platform: CALL_ME_LATER assumes the simulator's platform has "
    "no network (its master host's messages cross no link); on one with links, give "
    "--platform (and --master-host as its -m), or Batsim may abort with 'You asked to be "
    "awaken in the past!' when a timer falls within a reply's network time"
)
OUTPUTS_GRACE_S = 30.0  # how long the summary waits for a hand-started simulator's CSVs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-s",
        "--socket-endpoint",
        default=DEFAULT_ENDPOINT,
        metavar="ENDPOINT",
        help="where the simulator connects: tcp://127.0.0.1:PORT (loopback only; default "
        "%(default)s, Batsim's default port; PORT 0 picks a free one, said as the broker "
        "waits)",
    )
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="directory for the manifest, the logs, the kubeconfigs and NAME.env files "
        "(give the simulator -e DIR/out to have its CSVs there too)",
    )
    parser.add_argument(
        "--scheduler",
        action="append",
        default=[],
        metavar="CMD",
        help="a scheduler's command line, started by the broker as in timewarp simulate "
        "(repeatable)",
    )
    parser.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="NAME",
        help="a scheduler started by hand under `timewarp run --name NAME`, with the "
        "environment of DIR/NAME.env (repeatable); time waits until it is connected",
    )
    parser.add_argument(
        "--platform",
        dest="batsim_platform",
        metavar="FILE",
        help="the platform file the simulator runs (its -p): the broker asks for its "
        "CALL_ME_LATER after the network time of its reply's events on the master host's "
        "route (docs/broker.md); without it the broker assumes a platform without a network "
        "and says so",
    )
    parser.add_argument(
        "--master-host",
        default="master_host",
        metavar="NAME",
        help="with --platform: the simulator's -m, the master host when no host has "
        "role=master (default %(default)s, Batsim's)",
    )
    add_run_arguments(parser)


def _fail(message: str) -> int:
    print(f"timewarp broker: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from commands.modes import ModeArgumentError, check_mode_arguments

    host, _, port = args.socket_endpoint.removeprefix("tcp://").rpartition(":")
    if not args.socket_endpoint.startswith("tcp://") or host not in ("127.0.0.1", "localhost"):
        return _fail(
            f"-s {args.socket_endpoint}: the broker listens on loopback only (tcp://127.0.0.1:PORT)"
        )
    if port == "*":
        port = "0"
    if not port.isdigit() or not 0 <= int(port) < 65536:
        return _fail(f"-s {args.socket_endpoint}: expected a port number after the last ':'")
    args.socket_endpoint = f"tcp://127.0.0.1:{port}"
    if not args.scheduler and not args.expect:
        return _fail("give at least one --scheduler CMD or --expect NAME")
    for name in args.expect:
        if not name.replace("-", "").replace("_", "").isalnum():
            return _fail(f"--expect {name!r}: a name of letters, digits, '-' and '_'")
    from broker.drivers.pacing import PacingArgumentError, check_pacing_arguments

    try:
        check_mode_arguments(args)
        check_pacing_arguments(args)
    except (ModeArgumentError, PacingArgumentError) as exc:
        return _fail(str(exc))
    out = Path(args.output)
    try:
        check_output_dir(out)
    except OutputDirError as exc:
        return _fail(str(exc))
    from simulator.platform import PlatformError, load_platform

    transit = None
    if args.batsim_platform is not None:
        try:  # the CALL_ME_LATER rule's network time, once (docs/broker.md)
            transit = load_platform(args.batsim_platform, args.master_host).reply_transit()
        except PlatformError as exc:
            return _fail(f"--platform: {exc}")
    from broker.drivers.batsim_socket import EndpointInUse, bind_rep

    try:  # bound now, before any scheduler starts, and held: the broker is given it (a
        # port checked free here and bound later could be taken in between)
        sock, args.socket_endpoint = bind_rep(args.socket_endpoint)
    except EndpointInUse as exc:
        return _fail(f"-s {exc.strerror}")
    # what simulate's steps read and a broker alone does not have
    args.batsim = "external (started by hand)"
    args.platform, args.workload = None, []
    args.write_kubeconfig, args.incluster = None, False
    run = _BrokerRun(args, out, total_jobs=0, node_names=[], sock=sock)
    if transit is not None:
        run.reply_transit = transit
    else:
        run.platform_known = False
    return run.run()


def _exit_code(path: Path, wait_s: float) -> int | None:
    """The exit code `timewarp run` wrote to ``path``, waiting up to ``wait_s`` for it
    (None: it never came, or it is not a number)."""
    pause = threading.Event()
    for _ in range(max(1, int(wait_s / 0.05))):
        try:
            return int(path.read_text().strip())
        except FileNotFoundError:
            pause.wait(0.05)
        except (OSError, ValueError):
            return None
    return None


class _BrokerRun(Simulation):
    """``timewarp simulate``'s steps with the simulator left to the user: the broker
    binds Batsim's endpoint and says what to start; schedulers may be started by hand."""

    prog = "timewarp broker"

    def __init__(self, *args, sock, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._sock = sock  # Batsim's endpoint, bound by run(): the broker's from its start

    def _broker_endpoint(self) -> str:
        return self.args.socket_endpoint

    def _broker_socket(self):  # type: ignore[no-untyped-def]
        sock, self._sock = self._sock, None  # the broker owns (and closes) it from now on
        return sock

    def _take_down(self, parts: Wiring, result):  # type: ignore[no-untyped-def]
        if self._sock is not None:  # the run ended before the broker was made
            self._sock.close(0)
            self._sock = None
        if parts.broker is not None:  # node names for the plots, from SIMULATION_BEGINS
            nodes = sorted(parts.broker.cluster.nodes.items(), key=lambda kv: kv[1].resource_id)
            self.node_names = [name for name, _ in nodes]
        return super()._take_down(parts, result)

    def _start_schedulers(self, parts: Wiring) -> None:
        # the hand-started processes that exited 0 (the run went on): name -> exit, at_s
        self.by_hand_exits: dict[str, dict[str, object]] = {}
        super()._start_schedulers(parts)
        for name in self.args.expect:
            self._expect_by_hand(parts, name)
        # the broker asks the launcher whether a scheduler died; one started by hand is
        # not the launcher's child, but the clock knows when it said goodbye
        launched_check = parts.launcher.check

        def check() -> None:
            launched_check()
            self._check_by_hand(parts)

        parts.launcher.check = check  # type: ignore[method-assign]

    def _check_by_hand(self, parts: Wiring) -> None:
        """A scheduler started by hand that is gone: exit 0 ends only that process (a
        one-shot tool, a --once mode), as for the launcher's own unless
        ``--scheduler-exit fail``; any other exit, or none known, fails the run."""
        from broker.processes.launcher import EXIT_WAIT_S, SchedulerFailed

        for proc in parts.clock.registry.processes():
            if proc.name not in self.args.expect or not proc.gone:
                continue
            if proc.name in self.by_hand_exits:
                continue
            # `timewarp run` writes the code once its child is reaped: give it a moment
            # (time stands still meanwhile); a dropped connection without a bye may be an
            # exec going on under the same name, so that wait is shorter
            code = _exit_code(self.out / f"{proc.name}.exit", EXIT_WAIT_S if proc.said_bye else 5)
            if code == 0 and parts.launcher.zero_exit_continues:
                self.by_hand_exits[proc.name] = {
                    "exit": 0,
                    "at_s": None if proc.gone_at_ns is None else proc.gone_at_ns / 1e9,
                }
                print(
                    f"timewarp broker: {proc.name}, started by hand, exited 0 at simulated "
                    f"t={self.by_hand_exits[proc.name]['at_s']} s; the run goes on",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            said = "" if code is None else f" (exit code {code})"
            raise SchedulerFailed(
                f"scheduler {proc.name!r}, started by hand, ended{said} before the "
                "simulation did; see its terminal"
            )

    def _process_figures(self) -> None:
        super()._process_figures()
        for name, ended in getattr(self, "by_hand_exits", {}).items():
            self.per_process.setdefault(name, {}).update(ended=ended)

    def _expect_by_hand(self, parts: Wiring, name: str) -> None:
        """``NAME.kubeconfig`` and ``NAME.env`` for a scheduler started by hand; time
        waits for it to connect (the clock expects it, as the launcher's own)."""
        kubeconfig = self.out / f"{name}.kubeconfig"
        token = parts.endpoint.add_token(name)
        parts.endpoint.write_kubeconfig(kubeconfig, name)
        env = {
            "KUBECONFIG": str(kubeconfig.resolve()),
            clockproto.ENV_ENDPOINT: parts.clock.endpoint,
            # one credential per process, as the launcher gives: its facade token
            clockproto.ENV_TOKEN: parts.clock.expect(name, token),
            clockproto.ENV_BROKER_PID: str(os.getpid()),
            clockproto.ENV_FACADE: f"{parts.endpoint.host}:{parts.endpoint.port}",
            # `timewarp run` writes the program's exit code there (see _check_by_hand)
            ENV_EXIT_FILE: str((self.out / f"{name}.exit").resolve()),
        }
        text = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in env.items())
        # it holds credentials: readable by its owner only, as the kubeconfig
        write_text_atomically(self.out / f"{name}.env", text, private=True)

    def _start_simulator(self, endpoint: str):  # type: ignore[no-untyped-def]
        import zmq

        # Not our child: its end is seen on the socket (see _watch_simulator). The monitor
        # is made here, in the thread that owns the broker's socket (ZeroMQ sockets are
        # not thread-safe), before the simulator can connect.
        self._monitor = self._parts.broker._sock.get_monitor_socket(
            zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED
        )
        # the workloads are the simulator's: their services are read from the files its
        # SIMULATION_BEGINS names (they were silently dropped before: issue 27 item 9)
        self._parts.broker.services_from_simulator = True
        steps = []
        for name in self.args.expect:
            env = self.out / f"{name}.env"
            steps.append(
                f"source {shlex.quote(str(env))} && timewarp run --name {name} -- "
                "python YOUR_SCHEDULER.py"
            )
        steps.append(
            f"batsim -p PLATFORM.xml -w WORKLOAD.json -e {shlex.quote(str(self.out / OUT_PREFIX))} "
            f"--enable-compute-sharing --enable-dynamic-jobs -s {endpoint}   "
            "(or: timewarp sim with the same flags)"
        )
        lines = [f"timewarp broker: waiting for the simulator on {endpoint}; start, in order:"]
        lines += [f"  {i}. {step}" for i, step in enumerate(steps, 1)]
        if not self.platform_known:
            lines.append(NO_PLATFORM_NOTE)
        print("\n".join(lines), file=sys.stderr, flush=True)
        return None

    def _watch_simulator(self, broker) -> None:  # type: ignore[no-untyped-def]
        """A simulator started by hand that goes away (a crash, Ctrl-C in its terminal)
        before the end: stop waiting for its messages, as for the embedded one."""
        import zmq
        from zmq.utils.monitor import recv_monitor_message

        monitor = self._monitor
        if monitor is None:
            return
        connected = False
        try:
            while True:
                event = recv_monitor_message(monitor)
                if event["event"] == zmq.EVENT_ACCEPTED:
                    connected = True
                elif event["event"] == zmq.EVENT_DISCONNECTED and connected:
                    if broker.ended or self._taking_down:
                        return  # it went away after SIMULATION_ENDS, as it should
                    self._sim_failure = "the simulator disconnected before the simulation ended"
                    if not self.platform_known:  # its words are in its own terminal
                        self._sim_failure += (
                            " (if Batsim said 'You asked to be awaken in the past!': the "
                            "broker was not given --platform, see its note at start)"
                        )
                    broker.batsim_timeout_s = 0.5
                    return
                elif event["event"] == zmq.EVENT_MONITOR_STOPPED:
                    return
        except zmq.ZMQError:  # the broker closed its socket: the run is over
            return

    def _verdict(self, result, sim_code: int | None, reason: str) -> tuple[bool, str]:  # type: ignore[no-untyped-def]
        ok, reason = super()._verdict(result, sim_code, reason)
        if not ok and self._sim_failure:  # the cause, not its symptom (the silence after)
            reason = self._sim_failure
        return ok, reason

    def _stop_simulator(self, wait: bool) -> int | None:
        """Nothing to stop; after a good run, give the simulator a moment to write its
        CSVs where the summary can read them (if its -e points into -o)."""
        if not wait:
            return None
        done = threading.Event()
        for _ in range(int(OUTPUTS_GRACE_S / 0.1)):
            if all((self.out / name).exists() for name in OUT_FILES):
                break
            done.wait(0.1)
        return 0

    def _input_files(self) -> list[str]:
        return []  # the simulator's, unknown here
