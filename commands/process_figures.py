"""Where a run's time goes, per scheduler process: its CPU (user + system, from
``/proc``, read just before the processes are stopped; its children waited for
included) and its API requests by verb and resource (the facade's count,
``broker/facade/requestinfo.py``).

The share of each process's CPU spent in timewarp's runtime comes from the process itself
(the broker asks it at the end: ``timewarp/_core/selftime.py``), with the name of its
``--profile`` file. The request counts are part of the simulation (the same program makes
the same requests in deterministic time); the CPU figures measure the machine
(``*_cpu_s``, ``*_cpu_share``: left out of the determinism check).
"""

from __future__ import annotations

import os
from typing import Any

from timewarp.wire import procstat


def sample_cpu(processes: list[Any]) -> dict[str, dict[str, float]]:
    """``name -> {user_cpu_s, system_cpu_s}`` for the processes still running."""
    out = {}
    for proc in processes:
        popen = getattr(proc, "popen", None)
        if popen is None or popen.poll() is not None:
            continue
        cpu = procstat.cpu_times(popen.pid, children=True)
        if cpu is not None:
            out[proc.name] = {"user_cpu_s": round(cpu[0], 2), "system_cpu_s": round(cpu[1], 2)}
    return out


def add_runtime_share(cpu: dict[str, dict[str, Any]], runtime: dict[str, dict[str, Any]]) -> None:
    """Add to each process's CPU what timewarp's runtime took of it (its answer to the
    broker's ``report``, ``timewarp/_core/selftime.py``): ``runtime_cpu_s``,
    ``runtime_cpu_share`` (of the process's own CPU, both read by it at the same instant)
    and, with ``--profile``, the ``profile`` file's name."""
    for name, got in runtime.items():
        entry = cpu.setdefault(name, {})
        entry["runtime_cpu_s"] = round(got["runtime_cpu_ns"] / 1e9, 3)
        total = got["process_cpu_ns"]
        entry["runtime_cpu_share"] = (
            round(min(got["runtime_cpu_ns"] / total, 1.0), 3) if total else 0.0
        )
        if got.get("profile"):
            entry["profile"] = os.path.basename(got["profile"])


def figures(
    names: list[str], cpu: dict[str, dict[str, float]], counts: dict[tuple[str, str, str], int]
) -> dict[str, dict[str, Any]]:
    """Per process: its CPU and its requests (``"list pods": 12``, sorted), with totals."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        mine = {
            f"{verb} {resource}": n for (who, verb, resource), n in counts.items() if who == name
        }
        entry: dict[str, Any] = {
            "requests": sum(mine.values()),
            "requests_by_verb_and_resource": dict(sorted(mine.items())),
        }
        entry.update(cpu.get(name, {}))
        out[name] = entry
    return out


def summary_lines(per_process: dict[str, dict[str, Any]]) -> list[str]:
    """One line per process for the summary: CPU and the busiest request kinds."""
    lines = []
    for name, entry in per_process.items():
        cpu = ""
        if "user_cpu_s" in entry:
            cpu = f"cpu {entry['user_cpu_s'] + entry['system_cpu_s']:.2f} s, "
        if "runtime_cpu_share" in entry:
            cpu += f"{entry['runtime_cpu_share']:.0%} of its cpu in timewarp's runtime, "
        kinds = entry.get("requests_by_verb_and_resource", {})
        top = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        busiest = ", ".join(f"{kind} {n}" for kind, n in top[:4])
        ended = ""
        if entry.get("ended", {}).get("killed"):  # still there after the final SIGTERM
            grace = entry["ended"].get("after_sigterm_s")
            ended = f"; killed ({entry['ended']['killed']}) {grace:g} s after the final SIGTERM"
        elif entry.get("ended"):
            at = entry["ended"].get("at_s")
            when = f" at simulated t={at:,.3f} s" if at is not None else ""
            ended = f"; exited {entry['ended'].get('exit')}{when}, the run went on"
        lines.append(
            f"{name}: {cpu}{entry.get('requests', 0)} API requests ({busiest or 'none'}){ended}"
        )
    return lines
