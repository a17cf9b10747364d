"""`timewarp simulate` end to end: embedded simulator, broker, a scheduler written the
ordinary way (official client, real `time`), in deterministic mode."""

import contextlib
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from simrun import run_simulate

ROOT = Path(__file__).resolve().parent.parent
TINY = "python tests/programs/tiny_scheduler.py --scheduler-name default"
PLATFORM = ROOT / "examples" / "inputs" / "cluster16.xml"
BURST = ROOT / "examples" / "inputs" / "burst_40_delay170.json"


def simulate(
    out, env, *extra, scheduler=TINY, workload=BURST, platform=PLATFORM, timeout=240, quiet=True
):
    return run_simulate(
        out, env, scheduler, platform, workload, *extra, timeout=timeout, quiet=quiet
    )


def jobs(out):
    with open(out / "out_jobs.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def burst_run(tmp_path_factory, subprocess_env):
    out = tmp_path_factory.mktemp("burst")
    proc = simulate(out, subprocess_env, quiet=False)  # with its summary
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_every_job_runs_once_without_over_allocation(burst_run):
    out, proc = burst_run
    rows = jobs(out)
    assert len(rows) == 40
    assert {r["final_state"] for r in rows} == {"COMPLETED_SUCCESSFULLY"}
    # cluster16: 16 nodes x 1 core, jobs of 1 cpu for 170 s: at most 16 run at once, so
    # the burst needs ceil(40/16) = 3 waves; the third starts at 341, not 340, because the
    # scheduler's 30 s watch ends exactly at t=340 and it sleeps 1 s (virtual) before
    # watching again
    events = sorted(
        [(float(r["starting_time"]), 1) for r in rows]
        + [(float(r["finish_time"]), -1) for r in rows]
    )
    running = peak = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        running += delta
        peak = max(peak, running)
    assert peak <= 16
    per_node = {}
    for r in rows:
        per_node.setdefault(r["allocated_resources"], []).append(
            (float(r["starting_time"]), float(r["finish_time"]))
        )
    for spans in per_node.values():
        spans.sort()
        assert all(
            a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False)
        )
    assert float(json.loads((out / "manifest.json").read_text())["figures"]["makespan"]) == 511.0


def test_outputs_and_summary(burst_run):
    out, proc = burst_run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ok"] is True
    assert manifest["figures"]["rejected_by_kubelet"] == 0
    assert manifest["figures"]["nondeterministic_advances"] == 0
    assert set(manifest["inputs"]) == {str(PLATFORM), str(BURST)}
    assert "makespan" in proc.stderr and "511.0 s" in proc.stderr
    for name in (
        "out_schedule.csv",
        "out_machine_states.csv",
        "scheduler-0.log",
        "scheduler-0.kubeconfig",
    ):
        assert (out / name).exists(), name


def test_two_deterministic_runs_give_identical_bytes(burst_run, tmp_path, subprocess_env):
    first, _ = burst_run
    proc = simulate(tmp_path, subprocess_env)
    assert proc.returncode == 0, proc.stderr
    for name in ("out_jobs.csv", "out_schedule.csv", "out_machine_states.csv"):
        assert (tmp_path / name).read_bytes() == (first / name).read_bytes(), name


def test_a_crashing_scheduler_is_named_with_its_exit_code(tmp_path, subprocess_env):
    proc = simulate(
        tmp_path, subprocess_env, scheduler="python tests/programs/crashing_scheduler.py"
    )
    assert proc.returncode == 1
    assert "scheduler 'scheduler-0'" in proc.stderr
    assert "exited with code 7" in proc.stderr
    assert "giving up" in proc.stderr  # the end of its log
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["ok"] is False and "exited with code 7" in manifest["reason"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-p", "missing.xml", "-w", str(BURST)], "missing.xml: no such platform file"),
        (["-p", str(PLATFORM), "-w", str(PLATFORM)], str(PLATFORM)),
        (
            ["-p", str(PLATFORM), "-w", str(BURST), "--batsim", "/no/such/batsim"],
            "--batsim: program not found",
        ),
    ],
)
def test_bad_arguments_are_rejected_before_anything_starts(args, message, tmp_path, subprocess_env):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "timewarp",
            "simulate",
            "--scheduler",
            TINY,
            "-o",
            str(tmp_path / "o"),
            *args,
        ],
        cwd=ROOT,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not (tmp_path / "o").exists()


def test_in_cluster_configuration_over_https(tmp_path, subprocess_env):
    workload = tmp_path / "w.json"
    workload.write_text(
        json.dumps(
            {
                "nb_res": 16,
                "jobs": [{"id": str(i), "subtime": i, "res": 1, "profile": "p"} for i in range(3)],
                "profiles": {
                    "p": {"type": "delay", "delay": 50, "cpu": "1", "scheduler": "default"}
                },
            }
        )
    )
    proc = simulate(
        tmp_path / "out",
        subprocess_env,
        "--incluster",
        scheduler=TINY + " --incluster",
        workload=workload,
    )
    assert proc.returncode == 0, proc.stderr
    rows = jobs(tmp_path / "out")
    assert [r["final_state"] for r in rows] == ["COMPLETED_SUCCESSFULLY"] * 3


def test_a_multi_threaded_scheduler_is_reproducible_too(tmp_path, subprocess_env):
    """default_like watches pods and nodes from separate threads: which thread an API
    event wakes first must not depend on the operating system's timing."""
    runs = []
    for name in ("a", "b"):
        proc = simulate(
            tmp_path / name,
            subprocess_env,
            scheduler="python -m sample_schedulers.default_like --scheduler-name default",
        )
        assert proc.returncode == 0, proc.stderr
        runs.append((tmp_path / name / "out_jobs.csv").read_bytes())
    assert runs[0] == runs[1]


@contextlib.contextmanager
def started_until_scheduler_ready(tmp_path, env, **popen):
    """`timewarp simulate` with a scheduler that says when it runs (through a FIFO); the
    run never ends by itself (the scheduler binds nothing; --on-no-progress warn), so it is killed (its children die with it) if the test
    did not stop it."""
    import os
    import threading

    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    ready = threading.Event()
    threading.Thread(target=lambda: (open(fifo).read(), ready.set()), daemon=True).start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots", "--scheduler",
         f"python tests/programs/ready_scheduler.py {fifo}", "-p", str(PLATFORM), "-w", str(BURST),
         "-o", str(tmp_path / "out"), "--on-no-progress", "warn"],
        cwd=ROOT, env=env, **popen,
    )  # fmt: skip
    try:
        assert ready.wait(60), "the scheduler never started"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_sigterm_stops_every_process_and_keeps_the_files(tmp_path, subprocess_env):
    import signal

    with started_until_scheduler_ready(
        tmp_path, subprocess_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err  # 128 + SIGTERM, as `timewarp sim` (issue 15 item 6)
    assert "interrupted by SIGTERM" in err
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["ok"] is False
    leftovers = subprocess.run(
        ["pgrep", "-f", str(tmp_path)], capture_output=True, text=True
    ).stdout.split()
    assert leftovers == []


def test_sigkill_of_simulate_leaves_no_orphans(tmp_path, subprocess_env):
    import os
    import select

    with started_until_scheduler_ready(
        tmp_path, subprocess_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as proc:
        children = subprocess.run(
            ["pgrep", "-f", str(tmp_path)], capture_output=True, text=True
        ).stdout.split()
        pidfds = []
        for pid in children:
            if int(pid) == proc.pid:
                continue
            try:
                pidfds.append(os.pidfd_open(int(pid)))
            except ProcessLookupError:
                continue  # a short-lived child that has already ended is no orphan
        assert len(pidfds) >= 1  # the scheduler (the embedded simulator is a thread)
        proc.kill()
        proc.wait(10)
    pending = list(pidfds)
    while pending:  # each becomes readable when its process exits
        done, _, _ = select.select(pending, [], [], 20)
        assert done, "a simulate child outlived it"
        pending = [fd for fd in pending if fd not in done]
    for fd in pidfds:
        os.close(fd)
