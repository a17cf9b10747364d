"""``timewarp workload``: import SWF traces, generate workloads and platforms.

    timewarp workload from-swf TRACE.swf -o wl.json [--norm N] [--trim S] [--window A:B]
    timewarp workload from-cluster DUMP.json -o wl.json -p cluster.xml [--window A:B]
    timewarp workload from-alibaba PODS.csv --nodes NODES.csv -o wl.json -p cluster.xml
    timewarp workload burst   -n 40 --delay 170 -o burst.json
    timewarp workload spaced  -n 40 --delay 170 --interval 10 -o spaced.json
    timewarp workload poisson -n 100 --rate 0.1 --mean-delay 120 --seed 1 -o p.json
    timewarp workload burst   -n 20 --delay 600 --replicaset app --replicasets 4 -o rs.json
    timewarp workload mixed   -n 100 --rate 0.05 --gpu-fraction 0.3 --seed 1 -o m.json
    timewarp workload service --pattern weekly --low 5 --peak 80 --hpa-target 60 -o web.json
    timewarp workload batch   -n 500 --rate 0.01 --mean-delay 900 --daily-cycle 0.8 \
        --size 3:cpu=500m,memory=1Gi --size 1:cpu=4,memory=16Gi,nvidia.com/gpu=1 --seed 1 -o b.json
    timewarp workload platform -n 16 --cores 1 -o cluster16.xml
    timewarp workload platform --cpu-nodes 8 --gpu-nodes 4 -o hetero.xml
    timewarp workload platform -n 8 --label env=prod --taint gpu=yes:NoSchedule@6-7 \
        --unschedulable 1 -o shaped.xml

Every output is checked with the simulator's own loaders before it is written, and is
written atomically (no partial file on error). Exit 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from simulator import cli_types, generator_cli, generators, trace_cli
from simulator.generators import DEFAULT_SCHEDULER
from simulator.platform import PlatformError, load_platform
from simulator.swf import SwfError, convert, read_swf
from simulator.trace_select import SelectError, thin_and_scale
from simulator.workload import WorkloadError, load_workload

PROG = "timewarp workload"
HostCheck = Callable[[dict[str, str]], object]
FieldsCheck = Callable[[dict], object]  # a job's or profile's Kubernetes fields


_SCHEDULER_HELP = (
    "spec.schedulerName of the pods: the scheduler that must bind them (default "
    "default-scheduler, a real API server's, and the sample schedulers'; Batkube's "
    "workloads say 'default')"
)
_OUTPUT_HELP = "the file to write (atomically, with the umask's mode); its folder is made"


def _pod_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cpu", default="1", help="cpu request of each pod, a Kubernetes quantity (default 1)"
    )
    parser.add_argument(
        "--memory",
        default=None,
        help="memory request of each pod, a Kubernetes quantity like 500Mi (default: none)",
    )
    parser.add_argument("--scheduler", default=DEFAULT_SCHEDULER, help=_SCHEDULER_HELP)
    parser.add_argument(
        "--replicaset",
        metavar="NAME",
        help="the pods belong to ReplicaSet NAME (rebalancers such as KSE move only those)",
    )
    parser.add_argument(
        "--replicasets",
        type=cli_types.positive_int,
        default=1,
        metavar="K",
        help="with --replicaset: K ReplicaSets NAME-0..NAME-(K-1), pods dealt round robin "
        "(default 1)",
    )


_RS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _replicaset_error(args: argparse.Namespace) -> str | None:
    """A ReplicaSet name must be a DNS subdomain (as Kubernetes requires)."""
    name = getattr(args, "replicaset", None)
    if name is None:
        return "--replicasets needs --replicaset NAME" if args.replicasets != 1 else None
    if len(name) > 240 or not _RS_NAME.match(name):
        return f"--replicaset: {name!r} is not a valid name (lowercase letters, digits, '-', '.')"
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="tool", metavar="TOOL", required=True)
    trace_cli.add_parsers(sub, _OUTPUT_HELP, _SCHEDULER_HELP)
    generator_cli.add_parsers(sub, _OUTPUT_HELP, _SCHEDULER_HELP)

    swf = sub.add_parser("from-swf", help="import a Standard Workload Format trace")
    swf.add_argument("trace", help="SWF file (Parallel Workloads Archive format)")
    swf.add_argument("-o", "--output", required=True, help=_OUTPUT_HELP)
    swf.add_argument(
        "--mode",
        choices=("batkube", "procs"),
        default="batkube",
        help="batkube (default): one pod per job with cpu = norm*procs/MaxProcs; procs: "
        "res = procs",
    )
    swf.add_argument(
        "--norm",
        type=cli_types.positive,
        default=1.0,
        help="cpu (cores) of a job that takes all MaxProcs processors (default 1)",
    )
    swf.add_argument(
        "--max-procs",
        type=cli_types.positive_int,
        help="override the header's MaxProcs (processors)",
    )
    swf.add_argument(
        "--cpu-cap", type=cli_types.positive, help="cap each job's cpu, in cores (e.g. 5.9)"
    )
    swf.add_argument(
        "--trim",
        type=cli_types.positive,
        metavar="SECONDS",
        help="cap each job's run time (seconds)",
    )
    swf.add_argument(
        "--window",
        type=cli_types.window,
        metavar="START:END",
        help="keep the jobs submitted in [START, END) seconds of the trace (either may be "
        "left out); subtimes then count from the first kept job",
    )
    swf.add_argument(
        "--fraction",
        type=cli_types.fraction,
        default=1.0,
        metavar="F",
        help="keep a share F of the jobs, chosen by a hash of their numbers (default 1)",
    )
    swf.add_argument(
        "--scale",
        type=cli_types.positive,
        default=1.0,
        metavar="S",
        help="multiply submission times by S (0.5: twice the load; default 1)",
    )
    swf.add_argument(
        "--walltime-from-request",
        action="store_true",
        help="give each job its requested time (SWF field 9) as walltime (default: none)",
    )
    swf.add_argument("--scheduler", default=DEFAULT_SCHEDULER, help=_SCHEDULER_HELP)

    for name, text in (("burst", "N jobs at once"), ("spaced", "N jobs at a fixed interval")):
        gen = sub.add_parser(name, help=text)
        gen.add_argument("-n", "--count", type=cli_types.positive_int, required=True, help="jobs")
        gen.add_argument(
            "--delay",
            type=cli_types.non_negative,
            required=True,
            metavar="SECONDS",
            help="run time of each job, in seconds",
        )
        if name == "spaced":
            gen.add_argument(
                "--interval",
                type=cli_types.non_negative,
                required=True,
                metavar="SECONDS",
                help="seconds between two submissions (the first at 0)",
            )
        gen.add_argument(
            "--walltime",
            type=cli_types.positive,
            default=1000.0,
            metavar="SECONDS",
            help="Batsim walltime of each job: killed if still running after it (default 1000)",
        )
        gen.add_argument("-o", "--output", required=True, help=_OUTPUT_HELP)
        _pod_options(gen)

    poisson = sub.add_parser("poisson", help="Poisson arrivals at rate λ")
    poisson.add_argument("-n", "--count", type=cli_types.positive_int, required=True, help="jobs")
    poisson.add_argument(
        "--rate", type=cli_types.positive, required=True, help="mean arrivals per second (λ)"
    )
    poisson.add_argument(
        "--mean-delay",
        type=cli_types.positive,
        required=True,
        metavar="SECONDS",
        help="mean run time: each job's is drawn from an exponential distribution with "
        "this mean, rounded to whole seconds, at least 1 (see --fixed-delay)",
    )
    poisson.add_argument(
        "--fixed-delay", action="store_true", help="every job runs exactly --mean-delay"
    )
    poisson.add_argument(
        "--seed", type=int, required=True, help="random seed (same seed, same file)"
    )
    poisson.add_argument("-o", "--output", required=True, help=_OUTPUT_HELP)
    _pod_options(poisson)

    mixed = sub.add_parser("mixed", help="KubCG-style CPU/GPU image classes")
    mixed.add_argument("-n", "--count", type=cli_types.positive_int, required=True, help="jobs")
    mixed.add_argument(
        "--rate", type=cli_types.positive, required=True, help="mean arrivals per second (Poisson)"
    )
    mixed.add_argument(
        "--gpu-fraction",
        type=float,
        default=0.5,
        help="share of GPU-image jobs, within [0, 1] (default 0.5)",
    )
    for flag, default, what in (
        ("--gpu-on-gpu", 100.0, "a GPU-image job on a GPU node"),
        ("--gpu-on-cpu", 600.0, "a GPU-image job on a CPU node"),
        ("--cpu-on-gpu", 300.0, "a CPU-image job on a GPU node"),
        ("--cpu-on-cpu", 300.0, "a CPU-image job on a CPU node"),
    ):
        mixed.add_argument(
            flag,
            type=cli_types.non_negative,
            default=default,
            metavar="SECONDS",
            help=f"run time of {what} (default {default:g})",
        )
    mixed.add_argument(
        "--no-sharing-slowdown",
        action="store_true",
        help="jobs sharing a node run at full speed (default: they slow each other down)",
    )
    mixed.add_argument("--seed", type=int, required=True, help="random seed (same seed, same file)")
    mixed.add_argument("-o", "--output", required=True, help=_OUTPUT_HELP)
    mixed.add_argument(
        "--cpu", default="1", help="cpu request of each pod, a Kubernetes quantity (default 1)"
    )
    mixed.add_argument(
        "--memory",
        default="1Gi",
        help="memory request of each pod, a Kubernetes quantity (default 1Gi)",
    )
    mixed.add_argument("--scheduler", default=DEFAULT_SCHEDULER, help=_SCHEDULER_HELP)

    plat = sub.add_parser("platform", help="generate a SimGrid platform")
    plat.add_argument(
        "-n",
        "--nodes",
        type=cli_types.positive_int,
        help="homogeneous: this many nodes node0, node1, ...",
    )
    plat.add_argument(
        "--cpu-nodes", type=int, default=0, help="heterogeneous: CPU nodes cpu0, ... (default 0)"
    )
    plat.add_argument(
        "--gpu-nodes", type=int, default=0, help="heterogeneous: GPU nodes gpu0, ... (default 0)"
    )
    plat.add_argument(
        "--gpus-per-node",
        type=cli_types.positive_int,
        default=1,
        help="GPUs of a GPU node (default 1)",
    )
    plat.add_argument(
        "--cores", type=cli_types.positive_int, default=1, help="cpu cores per node (default 1)"
    )
    plat.add_argument(
        "--memory",
        default="4Gi",
        help="memory per node, a Kubernetes quantity (default 4Gi)",
    )
    plat.add_argument(
        "--speed",
        default="1Gf",
        help="SimGrid host speed in flop/s with a unit, e.g. 1Gf (default 1Gf; delay "
        "profiles do not depend on it)",
    )
    plat.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="K=V[,K=V...][@NODES]",
        help="node labels as kubectl label takes them, on every node or on NODES "
        "(indices in generated order: 3, 0-7); repeatable",
    )
    plat.add_argument(
        "--taint",
        action="append",
        default=[],
        metavar="K[=V]:EFFECT[,...][@NODES]",
        help="node taints as kubectl taint takes them (NoSchedule, PreferNoSchedule, "
        "NoExecute), on every node or on NODES; repeatable",
    )
    plat.add_argument(
        "--unschedulable",
        type=int,
        default=0,
        metavar="N",
        help="cordon the last N nodes (spec.unschedulable, as kubectl cordon; default 0)",
    )
    plat.add_argument("-o", "--output", required=True, help=_OUTPUT_HELP)


def _fail(text: str) -> int:
    print(f"{PROG}: {text}", file=sys.stderr)
    return 2


def _umask() -> int:
    mask = os.umask(0o022)  # reading it means setting it: put it back at once
    os.umask(mask)
    return mask


def _write_atomically(path: str, text: str, check) -> None:
    """Write ``text`` to a temporary file beside ``path``, ``check(tmp_path)``, rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        # mkstemp makes 0600; inputs are meant to be shared: the mode an ordinary
        # `open(path, "w")` gives, i.e. 0666 less the umask
        os.chmod(tmp, 0o666 & ~_umask())
        check(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _dump_workload(workload: dict, path: str) -> None:
    text = json.dumps(workload, indent=1) + "\n"
    # a workload must be loadable by the simulator on a platform wide enough for it
    _write_atomically(path, text, lambda tmp: load_workload(tmp, "w0", 1 << 30))


def _check_pod_fields(workload: dict, check_fields: FieldsCheck | None) -> None:
    """``check_fields`` on every profile and job; ValueError names which one."""
    if check_fields is None:
        return
    named = [(f"profiles[{name!r}]", p) for name, p in workload["profiles"].items()]
    named += [(f"jobs[{i}] (id {j['id']!r})", j) for i, j in enumerate(workload["jobs"])]
    for where, obj in named:
        try:
            check_fields(obj)
        except ValueError as exc:
            raise ValueError(f"{where}.{exc}") from None


def run(
    args: argparse.Namespace,
    check_host: HostCheck | None = None,
    check_fields: FieldsCheck | None = None,
) -> int:
    """``check_host(props)`` (the broker's node-shape rules, given by the ``timewarp``
    command) checks the Kubernetes properties a platform's hosts get from the flags, and
    ``check_fields(job or profile)`` (the pod-shape rules) those of the imported and
    generated pods; both raise ValueError with a message naming the property."""
    try:
        if args.tool in trace_cli.TOOLS:
            return _import_trace(args, check_host, check_fields)
        if args.tool in ("service", "batch"):
            try:
                workload = generator_cli.build(args)
                _check_pod_fields(workload, check_fields)
            except ValueError as exc:
                return _fail(str(exc))
            _dump_workload(workload, args.output)
            return 0
        if args.tool == "from-swf":
            jobs, header = read_swf(args.trace)
            workload = convert(
                jobs,
                header,
                source=args.trace,
                mode=args.mode,
                norm=args.norm,
                max_procs=args.max_procs,
                cpu_cap=args.cpu_cap,
                trim=args.trim,
                window=args.window,
                scheduler=args.scheduler,
                walltime_from_request=args.walltime_from_request,
            )
            workload = thin_and_scale(workload, args.fraction, args.scale)
            _dump_workload(workload, args.output)
            print(f"{PROG}: {len(workload['jobs'])} jobs -> {args.output}", file=sys.stderr)
        elif args.tool in ("burst", "spaced", "poisson") and _replicaset_error(args):
            return _fail(_replicaset_error(args))
        elif args.tool in ("burst", "spaced"):
            interval = args.interval if args.tool == "spaced" else 0.0
            workload = generators.spaced(
                args.count,
                args.delay,
                interval,
                cpu=args.cpu,
                memory=args.memory,
                scheduler=args.scheduler,
                walltime=args.walltime,
                replicaset=args.replicaset,
                groups=args.replicasets,
            )
            _dump_workload(workload, args.output)
        elif args.tool == "poisson":
            workload = generators.poisson(
                args.count,
                args.rate,
                args.mean_delay,
                seed=args.seed,
                fixed_delay=args.fixed_delay,
                cpu=args.cpu,
                memory=args.memory,
                scheduler=args.scheduler,
                replicaset=args.replicaset,
                groups=args.replicasets,
            )
            _dump_workload(workload, args.output)
        elif args.tool == "mixed":
            if not 0 <= args.gpu_fraction <= 1:
                return _fail("--gpu-fraction must be within [0, 1]")
            workload = generators.mixed(
                args.count,
                args.rate,
                seed=args.seed,
                gpu_fraction=args.gpu_fraction,
                gpu_image_durations=(args.gpu_on_gpu, args.gpu_on_cpu),
                cpu_image_durations=(args.cpu_on_gpu, args.cpu_on_cpu),
                cpu=args.cpu,
                memory=args.memory,
                scheduler=args.scheduler,
                sharing_slowdown=not args.no_sharing_slowdown,
            )
            _dump_workload(workload, args.output)
        else:
            return _platform(args, check_host)
    except (SwfError, WorkloadError, PlatformError, SelectError) as exc:
        return _fail(str(exc))
    except OSError as exc:  # an -o that cannot be written (read-only, missing, full)
        where = args.output if exc.filename in (None, args.output) else exc.filename
        return _fail(f"-o {args.output}: cannot write {where} ({exc.strerror or exc})")
    return 0


def _node_range(spec: str, flag: str, count: int) -> tuple[str, range]:
    """``VALUE@3`` or ``VALUE@0-7`` → (VALUE, node indices); no ``@``: every node."""
    value, at, nodes = spec.rpartition("@") if "@" in spec else (spec, "", "")
    if not at:
        return spec, range(count)
    low, dash, high = nodes.partition("-")
    try:
        first, last = int(low), int(high) if dash else int(low)
    except ValueError:
        raise ValueError(f"{flag} {spec!r}: NODES must be an index or FIRST-LAST") from None
    if not 0 <= first <= last < count:
        raise ValueError(f"{flag} {spec!r}: nodes {nodes} are not within 0-{count - 1}")
    return value, range(first, last + 1)


def _shape_props(args: argparse.Namespace, count: int) -> list[dict[str, str]]:
    """The labels, taints and cordon each generated node gets from the flags."""
    labels: list[dict[str, str]] = [{} for _ in range(count)]  # key -> "key=value"
    taints: list[list[str]] = [[] for _ in range(count)]
    for spec in args.label:
        value, nodes = _node_range(spec, "--label", count)
        for item in value.split(","):
            for i in nodes:  # a later --label of a key overrides an earlier one
                labels[i][item.partition("=")[0]] = item
    for spec in args.taint:
        value, nodes = _node_range(spec, "--taint", count)
        for i in nodes:
            taints[i].append(value)
    if not 0 <= args.unschedulable <= count:
        raise ValueError(f"--unschedulable {args.unschedulable}: the platform has {count} nodes")
    props: list[dict[str, str]] = []
    for i in range(count):
        extra = {}
        if labels[i]:
            extra["labels"] = ",".join(labels[i].values())
        if taints[i]:
            extra["taints"] = ",".join(taints[i])
        if i >= count - args.unschedulable:
            extra["unschedulable"] = "true"
        props.append(extra)
    return props


def _check_hosts(
    nodes: list[generators.Node], check_host: HostCheck | None, flags: dict[str, str]
) -> None:
    """``check_host`` on every host; ValueError names the flag (or prop) and the host."""
    for name, props in nodes:
        if check_host is not None:
            try:
                check_host(props)
            except ValueError as exc:
                prop = str(exc).partition(":")[0]
                raise ValueError(f"{flags.get(prop, prop)} (host {name}): {exc}") from None


def _import_trace(
    args: argparse.Namespace, check_host: HostCheck | None, check_fields: FieldsCheck | None
) -> int:
    """from-cluster / from-alibaba: both files checked, then both written."""
    try:
        workload, nodes, skipped = trace_cli.build(args)
        _check_hosts(nodes, check_host, {})
        _check_pod_fields(workload, check_fields)
    except ValueError as exc:
        return _fail(str(exc))
    workload["nb_res"] = len(nodes)
    _write_atomically(args.platform, generators.platform_xml(nodes), load_platform)
    _dump_workload(workload, args.output)
    services = len(workload.get("services", []))
    left = "".join(f", {n} pods left out ({why})" for why, n in skipped.items())
    print(
        f"{PROG}: {len(nodes)} nodes -> {args.platform}; {len(workload['jobs'])} jobs"
        f"{f' and {services} services' if services else ''} -> {args.output}{left}",
        file=sys.stderr,
    )
    return 0


def _platform(args: argparse.Namespace, check_host: HostCheck | None) -> int:
    hetero = args.cpu_nodes or args.gpu_nodes
    if args.nodes and hetero:
        return _fail("use either -n/--nodes or --cpu-nodes/--gpu-nodes, not both")
    if args.cpu_nodes < 0 or args.gpu_nodes < 0:
        return _fail("--cpu-nodes/--gpu-nodes must be >= 0")
    if args.nodes:
        nodes = generators.homogeneous_nodes(args.nodes, cores=args.cores, memory=args.memory)
    elif hetero:
        nodes = generators.heterogeneous_nodes(
            args.cpu_nodes,
            args.gpu_nodes,
            cores=args.cores,
            memory=args.memory,
            gpus_per_node=args.gpus_per_node,
        )
    else:
        return _fail("give -n/--nodes, or --cpu-nodes and/or --gpu-nodes")
    flags = {"labels": "--label", "taints": "--taint", "unschedulable": "--unschedulable"}
    try:
        extras = _shape_props(args, len(nodes))
        for (_name, props), extra in zip(nodes, extras, strict=True):
            props.update(extra)
        _check_hosts(nodes, check_host, flags)
    except ValueError as exc:
        return _fail(str(exc))
    _write_atomically(args.output, generators.platform_xml(nodes, args.speed), load_platform)
    return 0
