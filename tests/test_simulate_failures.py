"""`timewarp simulate` when something breaks that is not the scheduler: a bug in the
broker, an output directory that cannot be written, a disk that fills up. Each ends with
a clear message and the right exit status, and keeps what it could — never a bare
traceback, a half-written file, a 0-byte PNG or a `.tmp` left behind (issue 17 items 2
and 16)."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from simrun import delay_profiles, one_core_jobs, write_inputs

ROOT = Path(__file__).resolve().parent.parent
POLLER = "python tests/programs/polling_scheduler.py --interval 5"
JOBS = one_core_jobs((0, "p"), (0, "p"), (0, "p"))
PROFILES = delay_profiles("default-scheduler", p=10)


@pytest.fixture
def inputs(tmp_path):
    return write_inputs(tmp_path, JOBS, PROFILES)


def simulate(argv, env, *, preexec_fn=None, prefix=()):
    return subprocess.run(
        [sys.executable, *prefix, *argv],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, preexec_fn=preexec_fn,
    )  # fmt: skip


def simulate_argv(inputs, out, *extra):
    platform, workload = inputs
    return ["-m", "timewarp", "simulate", "-q", "--scheduler", POLLER, "-p", str(platform),
            "-w", str(workload), "-o", str(out), *extra]  # fmt: skip


def leftovers(out: Path) -> list[str]:
    """Half-written things: temporary files and empty files."""
    return [p.name for p in out.iterdir() if p.name.endswith(".tmp") or p.stat().st_size == 0
            and p.suffix in (".png", ".json", ".csv")]  # fmt: skip


def test_a_bug_in_the_broker_ends_the_run_with_a_manifest_and_the_tracebacks_gist(
    tmp_path, subprocess_env, inputs
):
    """Any unexpected exception in the broker (here: the cluster model failing on the
    first job submitted) ends the run as a failure with a manifest, never without."""
    wrapper = tmp_path / "buggy_timewarp.py"
    wrapper.write_text(
        "import sys\n"
        "from broker.cluster.cluster import Cluster\n"
        "def submit(self, data):\n"
        "    raise KeyError('a bug')\n"
        "Cluster.submit = submit\n"
        "from commands.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    out = tmp_path / "out"
    argv = simulate_argv(inputs, out)[2:]  # after "-m timewarp"
    r = simulate([str(wrapper), *argv], subprocess_env)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "FAILED: internal error: KeyError: 'a bug' at " in r.stderr
    assert "Traceback" not in r.stderr  # the gist on the terminal, the whole in the manifest
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ok"] is False and "KeyError: 'a bug'" in manifest["reason"]
    assert "raise KeyError('a bug')" in manifest["traceback"]
    assert manifest["outputs"] in ("partial", "none")
    assert leftovers(out) == []


def test_an_output_directory_that_cannot_be_written_is_a_usage_error(
    tmp_path, subprocess_env, inputs
):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    for target, words in (
        (a_file, "exists and is not a directory"),
        (a_file / "out", "cannot write there (Not a directory)"),
        (Path("/proc/timewarp-out"), "cannot write there ("),  # refused even to root
    ):
        r = simulate(simulate_argv(inputs, target), subprocess_env)
        assert r.returncode == 2, r.stderr[-3000:]
        assert f"timewarp simulate: -o {target}: {words}" in r.stderr
        assert "Traceback" not in r.stderr
    out = tmp_path / "out"
    for extra, words in (
        (["--cwd", str(a_file)], f"--cwd {a_file}: not a directory"),
        (["--write-kubeconfig", str(a_file / "kc")], f"--write-kubeconfig {a_file}: exists and"),
    ):
        r = simulate(simulate_argv(inputs, out, *extra), subprocess_env)
        assert r.returncode == 2 and words in r.stderr, r.stderr[-3000:]


def _file_size_limit(limit: int):
    def limit_writes() -> None:  # in the child: as if the disk held only `limit` bytes
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a core dump
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_writes


def test_a_full_disk_ends_with_exit_1_and_says_what_was_kept(tmp_path, subprocess_env, inputs):
    """Files may grow to 4 KiB: the CSVs and the manifest fit, the plots do not."""
    out = tmp_path / "out"
    r = simulate(simulate_argv(inputs, out), subprocess_env, preexec_fn=_file_size_limit(4096))
    assert r.returncode == 1, r.stderr[-3000:]
    assert "could not write plots (File too large)" in r.stderr
    assert f"kept in {out}: " in r.stderr and "out_jobs.csv" in r.stderr
    assert json.loads((out / "manifest.json").read_text())["outputs"] == "complete"
    assert not (out / "gantt.png").exists() and not (out / "utilisation.png").exists()
    assert leftovers(out) == []
    assert "Traceback" not in r.stderr


def test_a_disk_full_before_the_csvs_still_ends_the_run(tmp_path, subprocess_env, inputs):
    """Not even the simulator's outputs fit: the simulator's thread reports it and the
    run ends (exit 1) instead of waiting for a thread that died."""
    out = tmp_path / "out"
    r = simulate(simulate_argv(inputs, out), subprocess_env, preexec_fn=_file_size_limit(200))
    assert r.returncode == 1, r.stderr[-3000:]
    assert "FAILED" in r.stderr
    assert leftovers(out) == []


def test_the_simulator_thread_always_says_it_ended(tmp_path, monkeypatch, inputs):
    """The embedded simulator fails in a way that also breaks its log (a full disk):
    its thread must still mark itself done, or the run would wait for it forever."""
    import errno
    import threading

    from commands.simulating import simulator as simulator_side
    from simulator import cli as sim_cli

    go = threading.Event()

    def drive(*args, **kwargs):
        go.wait(30)
        raise OSError(errno.ENOSPC, "No space left on device")

    class FullLog:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        flush = write

        def close(self):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sim_cli, "drive", drive)
    platform, workload = inputs
    sim = simulator_side.EmbeddedSimulator(
        ["-p", str(platform), "-w", str(workload), "-e", str(tmp_path / "out"), "-q"],
        tmp_path / "simulator.log",
    )
    sim._log.close()
    sim._log = FullLog()
    go.set()
    assert sim.wait(30) == 1
