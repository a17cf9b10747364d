"""``timewarp explain OUT POD``: one pod's life in a finished run, from its outputs.

``POD`` is a pod name (``w0.1``), ``namespace/name``, or a Batsim job id (``w0!1``); a
job's pod name and its job id lead to each other (``broker/k8s/naming.py``), so either
finds the pod, in folders written before pod names showed the job id too (``w0-211``).
The story is read from ``out_decisions.csv`` (who bound it where, what the cluster looked
like then, a deletion, the kubelet's refusal, or why it was still pending at the end) and
``out_jobs.csv`` (submitted, started, ended, and how).
"""

from __future__ import annotations

import argparse
import csv
import functools
import sys
from pathlib import Path

from broker.k8s import naming

OUT_PREFIX = "out"  # timewarp simulate's files: out_jobs.csv, out_decisions.csv, ...

DECISIONS = f"{OUT_PREFIX}_decisions.csv"
JOBS = f"{OUT_PREFIX}_jobs.csv"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("output", metavar="OUT", help="the run's output folder (its -o)")
    parser.add_argument("pod", metavar="POD", help="a pod name, namespace/name, or a job id")


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@functools.cache
def _aliases(wanted: str) -> frozenset[str]:
    """``wanted`` and what it maps to: a job id's pod name, a pod name's job id."""
    found = {wanted}
    for convert in (naming.pod_name, naming.job_id):
        try:
            found.add(convert(wanted))
        except ValueError:
            pass  # not a job id / not a job's pod name: taken as it is
    return frozenset(found)


def _matches(row: dict[str, str], wanted: str) -> bool:
    if "/" in wanted and "!" not in wanted:
        namespace, _, name = wanted.partition("/")
        return row["namespace"] == namespace and bool(_aliases(name) & {row["name"]})
    return bool(_aliases(wanted) & {row["name"], row["job_id"]})


def _s(text: str) -> str:
    try:
        return f"{float(text):,.6g} s"
    except ValueError:
        return text


def _binding(row: dict[str, str]) -> str:
    text = f"bound to {row['target']} by {row['actor']}"
    facts = []
    if row["feasible_nodes"]:
        facts.append(f"{row['feasible_nodes']} node(s) could have taken it")
    if row["node_rank"]:
        facts.append(f"{row['target']} ranked {row['node_rank']} by free cpu")
    if row["node_free_cpu_before"]:
        facts.append(f"free cpu {row['node_free_cpu_before']}m -> {row['node_free_cpu_after']}m")
    if row["node_free_gpu_before"]:
        facts.append(f"free GPUs {row['node_free_gpu_before']} -> {row['node_free_gpu_after']}")
    if row["waited_s"]:
        facts.append(f"it had waited {_s(row['waited_s'])}")
    return text + (": " + "; ".join(facts) if facts else "")


def story(out: Path, wanted: str) -> list[str]:
    """The lines ``timewarp explain`` prints (ValueError when there is nothing to tell)."""
    if not (out / DECISIONS).is_file():
        raise ValueError(f"{out}: no {DECISIONS} (not a timewarp simulate output folder?)")
    rows = [r for r in _rows(out / DECISIONS) if r["kind"] == "Pod" and _matches(r, wanted)]
    if not rows:
        raise ValueError(f"{out}: no pod {wanted!r} in {DECISIONS} (it was never bound, "
                         "deleted or left pending: a name, namespace/name or job id)")  # fmt: skip
    first = rows[0]
    job_id = next((r["job_id"] for r in rows if r["job_id"]), "")
    lines = [f"pod {first['namespace']}/{first['name']}" + (f" (job {job_id})" if job_id else "")]
    events: list[tuple[float, int, str]] = []
    job = None
    if job_id and (out / JOBS).is_file():
        workload, _, local = job_id.partition("!")
        job = next(
            (
                r
                for r in _rows(out / JOBS)
                if r.get("job_id") == local and r.get("workload_name") == workload
            ),
            None,
        )
    if job is not None:
        events.append((float(job["submission_time"]), 0, "submitted: the pod is created, Pending"))
        if job.get("starting_time") not in (None, "", "-1"):
            events.append(
                (
                    float(job["starting_time"]),
                    2,
                    f"started (resources {job['allocated_resources']})",
                )
            )
            end = float(job["finish_time"])
            events.append(
                (end, 3, f"ended: {job['final_state']} after {_s(job['execution_time'])}")
            )
    for row in rows:
        t = float(row["time"])
        if row["action"] == "bind":
            events.append((t, 1, _binding(row)))
        elif row["action"] == "delete":
            why = f" ({row['detail']})" if row.get("detail") else ""  # DeletionByPodGC
            events.append((t, 1, f"deleted by {row['actor']}{why}"))
        elif row["action"] == "refused":
            events.append((t, 2, f"refused by the kubelet on {row['target']}: {row['detail']}"))
        elif row["action"] == "pending":
            events.append((t, 4, f"still pending at the end of the run: {row['detail']}"))
    for t, _, text in sorted(events, key=lambda e: (e[0], e[1])):
        lines.append(f"  t={_s(str(t)):>12}  {text}")
    return lines


def run(args: argparse.Namespace) -> int:
    try:
        lines = story(Path(args.output), args.pod)
    except (ValueError, OSError, KeyError) as exc:
        print(f"timewarp explain: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0
