"""A stop signal in the narrow windows of a command's main thread: each test forces one
window (a monkeypatched call sends the signal to its own process at that point — the
Python handler then runs at once, as a real one landing there would) and checks what a
user would see. The first stop signal raises in the main thread wherever it is
(commands/stopping.py); each window below once lost something: the whole clean-up, a
process, a folder, a user's output. The patched commands run in a child process (a
signal that the fix did not catch would end this test process otherwise)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from commands.stopping import Interrupted, StopSignals
from simulator.testing import write_platform, write_workload
from timewarp.wire import stophold

ROOT = Path(__file__).resolve().parent.parent
POLLER = "python tests/programs/polling_scheduler.py --interval 5"
SHORT = {"short": {"type": "delay", "delay": 10, "cpu": "1", "scheduler": "default-scheduler"}}
JOBS = [{"id": str(i), "subtime": 0, "res": 1, "profile": "short"} for i in (1, 2)]
SELF_SIGTERM = "os.kill(os.getpid(), signal.SIGTERM)  # the signal lands here\n"


def wrapped(
    tmp_path: Path, env: dict, prelude: str, argv: list[str]
) -> subprocess.CompletedProcess:
    """``timewarp ARGV`` in a child whose ``prelude`` (Python) patched a window first."""
    script = tmp_path / "patched_timewarp.py"
    script.write_text(
        "import os, signal, sys\n"
        + textwrap.dedent(prelude)
        + "from commands.cli import main\n"
        + 'if __name__ == "__main__":  # (not in the processes multiprocessing spawns)\n'
        + "    sys.exit(main(sys.argv[1:]))\n"
    )
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, str(script), *argv],
        cwd=ROOT,
        env={**env, "TMPDIR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def simulate_argv(tmp_path: Path) -> list[str]:
    platform = write_platform(tmp_path / "p.xml", 2, 1)
    workload = write_workload(tmp_path / "w.json", JOBS, SHORT)
    return ["simulate", "-q", "--no-plots", "--scheduler", POLLER, "-p", str(platform),
            "-w", str(workload), "-o", str(tmp_path / "out")]  # fmt: skip


def test_a_critical_block_holds_the_first_signal_until_it_ends():
    assert threading.current_thread() is threading.main_thread()  # where handlers run
    done = []
    with StopSignals("t"), pytest.raises(Interrupted) as raised:
        with stophold.critical:
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs here, and holds it
            done.append("the rest of the block")
    assert done == ["the rest of the block"]
    assert raised.value.signum == signal.SIGTERM
    assert not stophold.hold(Interrupted())  # no block open: due at once


def test_a_commands_own_block_shares_the_clis_and_is_armed_again_for_a_second_run():
    """``--check-determinism`` runs twice, each run in its own ``with StopSignals``
    inside the CLI's: the first run's clean-up shielded the state, so the second run
    must be stoppable again; a signal noted between the two must stop the second as it
    begins (it ran to its end, then reported itself interrupted)."""
    assert threading.current_thread() is threading.main_thread()  # where handlers run
    with StopSignals("t") as cli:
        with StopSignals("t") as first:
            first.shield()  # its clean-up
        with pytest.raises(Interrupted), StopSignals("t"):  # armed again
            os.kill(os.getpid(), signal.SIGTERM)
        assert cli.exit_code == 143
    with StopSignals("t") as cli:
        cli.shield()  # between the two runs: nothing to unwind
        os.kill(os.getpid(), signal.SIGTERM)  # noted
        with pytest.raises(Interrupted) as raised, StopSignals("t"):
            pytest.fail("the second run began")
        assert raised.value.signum == signal.SIGTERM


def test_a_signal_while_the_command_loads_is_interrupted_not_killed(tmp_path, subprocess_env):
    """The handlers were installed after the command's module was imported and its
    arguments parsed: a SIGTERM then (simulate's first ~0.5 s) killed it with the
    default action — no message, no clean-up (found by scripts/signal_stress.py)."""
    prelude = """
        import importlib
        from commands import cli
        real = importlib.import_module
        def import_module(name, *args):
            os.kill(os.getpid(), signal.SIGTERM)  # the signal lands here
            return real(name, *args)
        cli.importlib = type("I", (), {"import_module": staticmethod(import_module)})
        """
    r = wrapped(tmp_path, subprocess_env, prelude, ["patch", str(ROOT / "sample_schedulers"),
                                                     "-o", str(tmp_path / "out")])  # fmt: skip
    assert r.returncode == 143, r.stderr[-2000:]
    assert "timewarp patch: interrupted by SIGTERM" in r.stderr
    assert not (tmp_path / "out").exists()


def test_a_signal_as_the_clean_up_begins_does_not_skip_it(tmp_path, subprocess_env):
    """The first signal met at the start of simulate's ``finally`` (the call that shields
    the clean-up) escaped it: no take-down, no manifest, no summary."""
    prelude = f"""
        from commands.stopping import StopSignals
        real = StopSignals.shield
        def shield(self):
            if not getattr(StopSignals, "sent", False):
                StopSignals.sent = True
                {SELF_SIGTERM.strip()}
            real(self)
        StopSignals.shield = shield
        """
    r = wrapped(tmp_path, subprocess_env, prelude, simulate_argv(tmp_path))
    assert r.returncode == 143, r.stderr[-2000:]
    assert "FAILED: interrupted by SIGTERM" in r.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["ok"] is False and manifest["reason"] == "interrupted by SIGTERM"
    assert not list((tmp_path / "tmp").iterdir()), "temporary folders left behind"


def test_the_exit_status_agrees_with_the_manifest_when_a_signal_comes_during_the_report(
    tmp_path, subprocess_env
):
    """A signal noted while a good run's manifest was written (ok: true) still made the
    exit status 143: a script reading one and the other was told two things."""
    prelude = f"""
        from commands.simulating.simulation import Simulation
        real = Simulation._report
        def report(self, *args):
            {SELF_SIGTERM.strip()}
            return real(self, *args)
        Simulation._report = report
        """
    r = wrapped(tmp_path, subprocess_env, prelude, simulate_argv(tmp_path))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["ok"] is True, manifest["reason"]
    assert r.returncode == 0, r.stderr[-2000:]
    assert "SIGTERM noted" in r.stderr


def test_a_signal_as_the_launcher_makes_its_private_folders_leaves_none(tmp_path, subprocess_env):
    """The schedulers' private TMPDIRs live under one folder the launcher makes at the
    first start: a signal right after ``mkdtemp`` (before the launcher recorded it)
    left it behind after ``stop_all``."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = f"""
        import os, signal, sys, tempfile
        from pathlib import Path
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from test_launcher_stop import _Facade
        from broker.processes import launcher as launching
        from commands.stopping import Interrupted, StopSignals
        real = tempfile.mkdtemp
        def mkdtemp(*args, **kw):
            made = real(*args, **kw)
            {SELF_SIGTERM.strip()}
            return made
        launching.tempfile.mkdtemp = mkdtemp
        launcher = launching.Launcher(clock=None, facade=_Facade(), out_dir=Path({str(tmp_path)!r}), virtual=False)
        with StopSignals("t"):
            try:
                launcher.start(["sleep", "600"], name="s")
            except Interrupted:
                print("interrupted")
            launcher.stop_all(grace_s=5)
        """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT,
                       env={**subprocess_env, "TMPDIR": str(tmp)}, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["interrupted"]
    assert not list(tmp.iterdir()), "temporary folders left behind"


def test_run_standalone_passes_on_a_signal_met_just_after_the_program_started(
    tmp_path, subprocess_env
):
    """The signal raised between ``Popen`` and the try that passes it on: the program
    was left running after `timewarp run --standalone` exited 143."""
    pidfile = tmp_path / "pid"
    prelude = f"""
        import subprocess
        from broker.drivers import standalone
        real = subprocess.Popen
        class Popen(real):
            def __init__(self, *args, **kw):
                super().__init__(*args, **kw)
                open({str(pidfile)!r}, "w").write(str(self.pid))
                {SELF_SIGTERM.strip()}
        standalone.subprocess.Popen = Popen
        """
    r = wrapped(
        tmp_path, subprocess_env, prelude, ["run", "--standalone", "-q", "--", "sleep", "600"]
    )
    pid = int(pidfile.read_text())
    alive = Path(f"/proc/{pid}").exists() and b") Z" not in Path(f"/proc/{pid}/stat").read_bytes()
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert r.returncode == 143, r.stderr[-2000:]
    assert "interrupted by SIGTERM" in r.stderr
    assert not alive, "the program outlived timewarp run"
    assert not list((tmp_path / "tmp").iterdir()), "temporary folders left behind"


def _patched_tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "prog.py").write_text("import time\n\ntime.sleep(1)\n")
    return src


def test_a_signal_between_the_two_renames_of_patch_keeps_an_output(tmp_path, subprocess_env):
    """``-o OUT`` over an earlier copy is two renames (OUT away, the new copy in): a signal
    between them left no OUT at all — the earlier copy renamed aside (and removed as
    stale by the next run), the new one removed as unfinished."""
    src, out = _patched_tree(tmp_path), tmp_path / "out"
    first = wrapped(tmp_path, subprocess_env, "", ["patch", str(src), "-o", str(out)])
    assert first.returncode == 0, first.stderr
    prelude = f"""
        real = os.rename
        def rename(a, b):
            real(a, b)
            if str(a) == {str(out)!r}:  # the earlier copy moved aside
                {SELF_SIGTERM.strip()}
        os.rename = rename
        """
    r = wrapped(tmp_path, subprocess_env, prelude, ["patch", str(src), "-o", str(out)])
    assert r.returncode == 143, r.stderr[-2000:]
    assert "stopped by SIGTERM" in r.stderr
    assert (out / "prog.py").exists(), sorted(p.name for p in tmp_path.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")) == []


def test_a_signal_as_patch_makes_its_temporary_file_leaves_none(tmp_path, subprocess_env):
    """``--in-place``: a signal right after ``mkstemp`` (before the try that removes it)
    left ``.prog.py.XXXX.tmp`` in the user's tree."""
    src = _patched_tree(tmp_path)
    prelude = f"""
        import tempfile
        real = tempfile.mkstemp
        def mkstemp(*args, **kw):
            made = real(*args, **kw)
            {SELF_SIGTERM.strip()}
            return made
        tempfile.mkstemp = mkstemp
        """
    r = wrapped(tmp_path, subprocess_env, prelude, ["patch", "--in-place", str(src)])
    assert r.returncode == 143, r.stderr[-2000:]
    assert sorted(p.name for p in src.iterdir()) == ["prog.py"]
    assert "timewarp" in (src / "prog.py").read_text()  # rewritten whole, then stopped


def test_sim_ends_on_sighup_with_its_partial_outputs(tmp_path, subprocess_env):
    """`timewarp sim` handled SIGTERM and SIGINT only: SIGHUP (a closed terminal) killed
    it with the default action, its outputs left as temporary files."""
    platform = write_platform(tmp_path / "p.xml", 2, 1)
    workload = write_workload(tmp_path / "w.json", JOBS, SHORT)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "timewarp", "sim", "-q", "-p", str(platform), "-w", str(workload),
         "-e", str(out), "-s", "tcp://127.0.0.1:9"],  # nobody answers: it waits, as Batsim
        cwd=ROOT, env=subprocess_env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        tick = threading.Event()
        for _ in range(3000):  # its outputs are open once its handlers are in (bounded)
            if list(tmp_path.glob("out_jobs.csv*")):
                break
            tick.wait(0.05)
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 129, err
    assert "timewarp sim: SIGHUP: " in err and "partial outputs written" in err
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
