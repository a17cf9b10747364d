"""``timewarp workload``: the simulator's workload and platform tools
(``simulator/workload_cli.py``), with the broker's rules for the Kubernetes properties
a generated platform's hosts get (``--label``, ``--taint``, ``--unschedulable``): a bad
value exits 2 naming the flag before anything is written; and with its rules for the pods
an importer or a generator makes (``broker/cluster/pod_shape.py``)."""

from __future__ import annotations

import argparse

from broker.cluster.node_shape import node_shape
from broker.cluster.pod_shape import check_fields
from simulator import workload_cli

add_arguments = workload_cli.add_arguments


def run(args: argparse.Namespace) -> int:
    return workload_cli.run(args, check_host=node_shape, check_fields=check_fields)
