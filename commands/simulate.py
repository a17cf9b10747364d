"""``timewarp simulate``: the simulator, the broker and the scheduler(s) in one command.

    timewarp simulate --scheduler 'python -m sample_schedulers.default_like --scheduler-name default' \\
        -p examples/inputs/cluster16.xml -w examples/inputs/burst_40_delay170.json -o out/

Each ``--scheduler`` is an ordinary command line, run under ``timewarp run`` (its own
modules and the ``--patch-module`` packages are rewritten on import) with its own token
and ``KUBECONFIG``. Outputs in ``-o``: Batsim's CSVs (``out_jobs.csv``,
``out_schedule.csv``, ``out_machine_states.csv``), ``manifest.json`` (versions,
arguments, input hashes, figures), ``gantt.png`` and ``utilisation.png``, and one log per
process. Ctrl-C or any failure stops everything, keeps what was written, and exits
non-zero with the reason (1; 128 + the signal when stopped by one, whatever further
signals come during the clean-up: see :mod:`commands.stopping`); the embedded simulator
then writes *partial* CSVs (the jobs that ended so far), marked ``"outputs": "partial"``
in manifest.json and in the summary (outputs of an earlier run in the same directory are
removed first, so what is there is this run's). ``--until T`` ends a run at simulated
time T the same way, by request (exit 0); :mod:`commands.guards` warns when pods wait
and nothing binds them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from commands.simulating.checks import (
    Refused,
    check_options,
    check_output,
    check_paths,
    check_platform_for_batsim,
    declared_objects,
    master_flags,
    read_inputs,
    services_of,
)
from commands.simulating.options import add_arguments, add_run_arguments, run_seed, sim_duration
from commands.simulating.outputs import OUT_FILES, OUT_PREFIX
from commands.simulating.simulation import Simulation

__all__ = [
    "OUT_FILES",
    "OUT_PREFIX",
    "add_arguments",
    "add_run_arguments",
    "run",
    "run_seed",
    "sim_duration",
]


def _fail(message: str, code: int = 2) -> int:
    print(f"timewarp simulate: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    """Check everything a run needs before anything starts (the inputs, the options, the
    paths), then run it: a refusal exits 2 with a message and leaves nothing behind."""
    out = Path(args.output)
    try:
        platform, workloads = read_inputs(args)
        check_options(args)
        check_platform_for_batsim(args, platform)
        check_paths(args)
        services = services_of(workloads)
        declared = declared_objects(workloads)
        check_output(out)
    except Refused as exc:
        return _fail(str(exc))
    total_jobs = sum(len(w.jobs) for w in workloads)
    node_names = [host.name for host in platform.compute]
    reply_transit = platform.reply_transit()  # the broker's CALL_ME_LATER rule (docs/broker.md)
    # the simulator reads the workloads itself: the checked copies (every job, ~1 KiB
    # each) are not kept for the length of the run
    del workloads

    def run_into(folder: Path) -> int:
        simulation = Simulation(args, folder, total_jobs, node_names, services, declared)
        simulation.master_flags = master_flags(platform)
        simulation.reply_transit = reply_transit
        return simulation.run()

    from commands.determinism_check import remove_leftover, run_twice

    if getattr(args, "check_determinism", False):
        return run_twice(out, run_into, sys.stderr, "timewarp simulate")
    remove_leftover(out, sys.stderr, "timewarp simulate")  # a killed check's scratch
    return run_into(out)
