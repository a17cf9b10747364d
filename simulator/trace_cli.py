"""``timewarp workload from-cluster`` and ``from-alibaba``: their flags and the platform
and workload they make (``simulator/kube_import.py``, ``simulator/alibaba.py``); the
selection flags (``--window``, ``--fraction``, ``--scale``) every trace importer shares."""

from __future__ import annotations

import argparse
from typing import Any

from simulator import alibaba, cli_types, kube_import
from simulator.generators import DEFAULT_SCHEDULER, Node

TOOLS = ("from-cluster", "from-alibaba")


def selection_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--window",
        type=cli_types.window,
        metavar="START:END",
        help=f"keep the {what} submitted in [START, END) seconds after the trace's first "
        "(either may be left out); subtimes then count from the first kept one",
    )
    parser.add_argument(
        "--fraction",
        type=cli_types.fraction,
        default=1.0,
        metavar="F",
        help=f"keep a share F of the {what}, chosen by a hash of their names (the same F "
        "keeps the same ones; default 1)",
    )
    parser.add_argument(
        "--scale",
        type=cli_types.positive,
        default=1.0,
        metavar="S",
        help="multiply submission times by S (0.5: the same arrivals in half the time, "
        "twice the load; default 1)",
    )


def _trace_outputs(parser: argparse.ArgumentParser, output_help: str, scheduler_help: str) -> None:
    parser.add_argument("-o", "--output", required=True, help=output_help + " (the workload)")
    parser.add_argument(
        "-p", "--platform", required=True, help="the platform file to write (SimGrid XML)"
    )
    parser.add_argument("--scheduler", default=DEFAULT_SCHEDULER, help=scheduler_help)


def add_parsers(sub: Any, output_help: str, scheduler_help: str) -> None:
    cluster = sub.add_parser(
        "from-cluster",
        help="import a cluster snapshot (kubectl get nodes,pods,deployments,hpa -A -o json)",
    )
    cluster.add_argument("dump", help="the snapshot: a kubectl List in JSON")
    _trace_outputs(cluster, output_help, scheduler_help)
    selection_options(cluster, "pods")
    cluster.add_argument(
        "--duration",
        type=cli_types.positive,
        default=3600.0,
        metavar="SECONDS",
        help="how long each Deployment's service serves traffic (default 3600)",
    )
    cluster.add_argument(
        "--request-cost",
        type=cli_types.positive,
        default=0.05,
        metavar="SECONDS",
        help="mean CPU-seconds per request of the services' traffic (default 0.05)",
    )
    cluster.add_argument(
        "--utilization",
        type=cli_types.fraction,
        default=0.5,
        help="CPU utilisation the traffic keeps a Deployment at when no HPA says what it saw "
        "(default 0.5)",
    )
    cluster.add_argument(
        "--default-lifetime",
        type=cli_types.positive,
        default=600.0,
        metavar="SECONDS",
        help="run time of a pod that never started in the snapshot (default 600)",
    )
    ali = sub.add_parser(
        "from-alibaba", help="import Alibaba's GPU cluster trace (pod and node lists)"
    )
    ali.add_argument("pods", help="the pod list CSV (openb_pod_list_*.csv)")
    ali.add_argument("--nodes", required=True, help="the node list CSV (openb_node_list_*.csv)")
    _trace_outputs(ali, output_help, scheduler_help)
    selection_options(ali, "pods")


def build(args: argparse.Namespace) -> tuple[dict[str, Any], list[Node], dict[str, int]]:
    """(workload, platform nodes, pods left out by why) of the trace ``args`` name;
    ValueError (ClusterDumpError, AlibabaError, SelectError) names the problem."""
    if args.tool == "from-cluster":
        converted = kube_import.convert(
            kube_import.read_dump(args.dump),
            source=args.dump,
            scheduler=args.scheduler,
            window=args.window,
            fraction=args.fraction,
            scale=args.scale,
            default_lifetime=args.default_lifetime,
            services=kube_import.ServiceOptions(
                duration=args.duration,
                request_cost=args.request_cost,
                utilization=args.utilization,
            ),
        )
        return converted.workload, converted.nodes, converted.skipped
    nodes = alibaba.read_nodes(args.nodes)
    workload = alibaba.convert(
        alibaba.read_pods(args.pods),
        source=args.pods,
        scheduler=args.scheduler,
        window=args.window,
        fraction=args.fraction,
        scale=args.scale,
    )
    return workload, nodes, {}
