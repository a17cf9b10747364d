"""Replay a recorded `timewarp sim` run in-process: the simulator's own CPU, no wire.

    .venv/bin/python -m timewarp sim -p P -w W -e rec -s tcp://… --message-log log.txt
    .venv/bin/python benchmarks/sim_replay.py -p P -w W --log log.txt [-n 3000] [-e out]

The decision process's recorded replies are fed back one by one; every message the
simulator sends is encoded (as the wire would) and compared with the recorded one, so a
change that alters any message fails here at once. ``-n``: stop after that many messages
(a deterministic slice for callgrind: instruction counts per message are the difference
of two slices over the difference of their lengths). ``-e``: write the outputs (with
``--reproducible``'s zero wall-clock columns) to compare whole CSVs with ``cmp``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from simulator import cli  # noqa: E402
from simulator import protocol as p  # noqa: E402
from simulator.outputs import StreamingOutputs  # noqa: E402

SENT = "BATSIM -> SCHED: "
REPLY = "SCHED -> BATSIM: "


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-p", "--platform", required=True)
    parser.add_argument("-w", "--workload", required=True)
    parser.add_argument("--log", required=True, help="a --message-log of the recorded run")
    parser.add_argument("-n", "--messages", type=int, default=0, help="stop after N (0: all)")
    parser.add_argument("-e", "--export", help="write the outputs with this prefix")
    args = parser.parse_args(argv)
    began = time.process_time()
    sent: list[str] = []
    replies: list[bytes] = []
    with open(args.log, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(SENT):
                sent.append(line[len(SENT) : -1])
            else:
                replies.append(line[len(REPLY) : -1].encode())
    sim_args = argparse.Namespace(
        platform=args.platform, workload=[args.workload], master_host="master_host",
        acknowledge_dynamic_jobs=False, enable_dynamic_jobs=False, submission_latency=0.0,
        reply_timeout=None, enable_compute_sharing=False, disable_storage_sharing=False,
        forward_profiles_on_submission=False, enable_profile_reuse=False,
        forward_unknown_events=False, sched_cfg="", energy=False,
    )  # fmt: skip
    sim = cli.prepare(sim_args)
    assert not isinstance(sim, int), "bad inputs"
    if hasattr(cli, "settle_heap"):  # as `timewarp sim` runs (since s10-kernel)
        cli.settle_heap()
    outputs = StreamingOutputs(args.export, sim.nb_compute) if args.export else None
    if outputs is not None:
        sim.stream_to(outputs)
    limit = args.messages or len(sent)
    message = sim.first_message()
    count = 0
    while True:
        text = p.encode(message)
        if text != sent[count]:
            print(f"message {count} differs:\n  {text[:300]}\n  {sent[count][:300]}")
            return 1
        reply = p.decode(replies[count], "decision")
        count += 1
        if sim.ended or count >= limit:
            break
        message = sim.handle_reply(reply)
        if outputs is not None:
            outputs.write_held()
    if outputs is not None and sim.ended:
        outputs.finish(sim.machines, 0.0, 0.0)
    print(f"{count} messages replayed, equal to the log; {time.process_time() - began:.2f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
