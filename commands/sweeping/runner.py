"""One run on a Dask worker: ``timewarp simulate`` in a subprocess, then ``result.json``.

``run_point`` never raises: whatever happens (bad flags, a crashed scheduler, a timeout,
an exception here) ends as a ``result.json`` with ``status`` ``ok`` or ``failed`` and the
error, written atomically as the run's last act. Its presence is what "finished" means;
a directory without it is a run that was interrupted and will be redone from scratch.

Runs are independent processes, so a worker needs only this module, ``timewarp`` on its
Python and the results directory (and inputs) on a shared filesystem.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

RESULT_FILE = "result.json"
POINT_FILE = "point.json"
LOG_FILE = "simulate.log"
POLL_S = 0.25

# Runs in progress in this worker process, so a closing worker can stop them cleanly.
_active: dict[int, subprocess.Popen] = {}
_active_lock = threading.Lock()
_shutting_down = threading.Event()


class RunInterrupted(RuntimeError):
    """The worker is closing: the run was stopped and left unfinished (it will be redone)."""


def stop_all_runs() -> None:
    """Stop every run of this worker process; their directories stay unfinished.

    Called when a worker closes (``commands.sweeping.worker_plugin``). The fallback when a
    worker is killed outright is the SIGINT its runs get from ``PR_SET_PDEATHSIG``.
    """
    _shutting_down.set()
    with _active_lock:
        procs = list(_active.values())
    for proc in procs:
        _stop(proc)


def accept_runs() -> None:
    """Undo ``stop_all_runs`` for this process: a new worker starts in it. Matters only for
    in-process clusters (``LocalCluster(processes=False)``), where a closed worker's flag
    would otherwise refuse every run of the next cluster in the same process."""
    _shutting_down.clear()


def run_point(task: dict[str, Any]) -> dict[str, Any]:
    """Run one simulation described by ``Run.task()``; return (and write) its result."""
    directory = Path(task["directory"])
    started = time.perf_counter()
    result: dict[str, Any] = {"run_id": task["run_id"], "host": socket.gethostname()}
    try:
        if directory.exists():  # an interrupted attempt: start clean
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        _write_json(directory / POINT_FILE, task["record"])
        result.update(_simulate(task, directory))
    except RunInterrupted:
        raise
    except Exception as exc:  # the contract: every run ends with a result.json
        result.update(
            status="failed",
            error=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
        )
    result["elapsed_s"] = round(time.perf_counter() - started, 3)
    result["result_bytes"] = _tree_bytes(directory)
    _write_json(directory / RESULT_FILE, result)
    return result


def _simulate(task: dict[str, Any], directory: Path) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [task["cwd"], env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "timewarp", "simulate", *task["simulate_argv"]]
    if _shutting_down.is_set():
        raise RunInterrupted("the worker is closing")
    with open(directory / LOG_FILE, "wb") as log:
        proc = subprocess.Popen(
            argv,
            cwd=task["cwd"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    with _active_lock:
        _active[proc.pid] = proc
    try:
        peak_rss, timed_out = _wait(proc, task["timeout"])
    finally:
        with _active_lock:
            _active.pop(proc.pid, None)
    if _shutting_down.is_set():
        raise RunInterrupted("the worker closed during the run")
    code = proc.returncode
    out: dict[str, Any] = {"returncode": code, "peak_rss_bytes": peak_rss}
    manifest = _read_json(directory / "manifest.json")
    if manifest is not None:
        out["figures"] = manifest.get("figures", {})
    if timed_out:
        out.update(status="failed", error=f"timed out after {task['timeout']:g} s (wall clock)")
    elif code == 0 and manifest is not None and manifest.get("ok"):
        out["status"] = "ok"
    else:
        out.update(status="failed", error=_failure_reason(directory / LOG_FILE, manifest, code))
    return out


def _wait(proc: subprocess.Popen, timeout: float) -> tuple[int, bool]:
    """Wait for the run, tracking the peak summed RSS of its process tree."""
    try:
        import psutil  # a dependency of dask.distributed

        root = psutil.Process(proc.pid)
    except Exception:
        root = None
    deadline = time.monotonic() + timeout
    peak = 0
    seen: dict[int, Any] = {}
    try:
        while True:
            try:
                proc.wait(timeout=POLL_S)
                return peak, False
            except subprocess.TimeoutExpired:
                pass
            if root is not None:
                peak = max(peak, _tree_rss(root, seen))
            if time.monotonic() >= deadline:
                _stop(proc)
                return peak, True
    finally:
        _reap_leftovers(seen)


def _tree_rss(root: Any, seen: dict[int, Any]) -> int:
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except Exception:
        return 0
    for p in procs[1:]:
        seen.setdefault(p.pid, p)
    for p in procs:
        try:
            total += p.memory_info().rss
        except Exception:
            pass
    return total


def _reap_leftovers(seen: dict[int, Any]) -> None:
    """Terminate descendants that outlived simulate (its schedulers and simulator run in
    their own sessions, so a dying simulate can orphan them). psutil.Process checks the
    start time, so a recycled pid is never signalled."""
    import psutil

    alive = [p for p in seen.values() if p.is_running()]
    for p in alive:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _gone, still = psutil.wait_procs(alive, timeout=5)
    for p in still:
        try:
            p.kill()
        except psutil.Error:
            pass


def _stop(proc: subprocess.Popen) -> None:
    """SIGINT first: simulate then stops its scheduler and simulator and keeps its logs."""
    for sig, grace in ((signal.SIGINT, 10), (signal.SIGTERM, 5), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _die_with_parent() -> None:
    """Linux: SIGINT the run when its worker process dies (prctl PR_SET_PDEATHSIG)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGINT)
    except Exception:
        pass


def _failure_reason(log: Path, manifest: dict | None, code: int | None) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    for line in reversed(lines):
        if "FAILED:" in line:
            return line.split("FAILED:", 1)[1].strip()
    if manifest is not None and manifest.get("reason"):
        return str(manifest["reason"])
    usage_errors = [ln for ln in lines if ": error: " in ln]
    if usage_errors:  # argparse: the usage lines before it only repeat the flags
        return usage_errors[-1].strip() + f" (exit {code})"
    tail = [ln for ln in lines if ln.strip()][-3:]
    return f"timewarp simulate exited with code {code}" + (": " + " | ".join(tail) if tail else "")


def _tree_bytes(directory: Path) -> int:
    total = 0
    for path in directory.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:
            pass
    return total


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
