"""Real Batsim 4.2.1 side by side with the embedded simulator (``pytest -m batsim`` runs
only these). They skip, with the reason, where the binary is absent or cannot run, and
fail instead under CI (``CI=true``).

1. The simulator's contract: the same seeded random inputs and decision process give the
   same messages from both, byte for byte at Batsim's precision (its batching of
   same-instant events included); Batkube's three inputs with the reference FCFS too.
2. ``timewarp simulate --batsim``: two sample schedulers, a generated platform, Batkube's
   burst, a timer below the microsecond, lockstep mode — the same jobs CSV as the embedded
   simulator in deterministic mode — and runs that fail for Batsim's own reason.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from realbatsim import batsim_or_skip, canonical, run_embedded, run_real, scenario
from simrun import run_simulate

from simulator import generators
from simulator import protocol as p
from simulator.fcfs import Fcfs
from simulator.testing import ROOT, shared_data_dir

pytestmark = pytest.mark.batsim

EXAMPLES = ROOT / "examples" / "inputs"
DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"
KCSS = "python -m sample_schedulers.kcss --scheduler-name default"


@pytest.fixture(scope="module")
def batsim() -> Path:
    return batsim_or_skip()


# --------------------------------------------------------------------------- the contract


def _same_messages(
    real: tuple[list[str], str], ours: tuple[list[str], str], refused: str = "error"
) -> None:
    """``refused``: how ``ours`` ends where Batsim aborts on a decision it refuses ("error"
    in-process; "exit 1" for the `timewarp sim` command)."""
    (real_sent, real_end), (our_sent, our_end) = real, ours
    for index, (a, b) in enumerate(zip(real_sent, our_sent, strict=False)):
        assert canonical(a) == canonical(b), f"message {index} differs"
    assert len(real_sent) == len(our_sent), (real_end, our_end)
    if real_end == "SIMULATION_ENDS":
        assert our_end == "SIMULATION_ENDS"
    else:  # Batsim aborted (exit 134): the embedded simulator refused the same decision
        assert real_end.startswith("exit") and our_end.startswith(refused), (real_end, our_end)


# 1..30, and three parallel tasks whose run time equals their walltime: done when the
# step lands on their end (1121), walltime reached when another event ends a step within
# 1e-9 s before it (1142, 1936) — SimGrid's timeout detector (simulator.kernel)
@pytest.mark.parametrize("seed", [*range(1, 31), 1121, 1142, 1936])
def test_random_inputs_and_decisions_give_the_same_messages(batsim, tmp_path, seed):
    sc = scenario(seed)
    _same_messages(run_real(sc, seed, tmp_path), run_embedded(sc, seed, tmp_path))


@pytest.mark.parametrize("seed", [1, 2, 3, 5, 8])
def test_timewarp_sim_over_tcp_sends_the_messages_batsim_sends(batsim, tmp_path, seed):
    """The command as Batsim's users run it — its own process, ZeroMQ TCP, outputs
    streamed to files (ended jobs forgotten) — not only the simulator in-process: a
    JOB_COMPLETED once lost its allocation there."""
    sc = scenario(seed)
    ours = run_real(sc, seed, tmp_path, program=[sys.executable, "-m", "timewarp", "sim", "-q"])
    _same_messages(run_real(sc, seed, tmp_path), ours, refused="exit 1")


@pytest.mark.slow
def test_a_thousand_random_inputs_and_decisions_give_the_same_messages(batsim, tmp_path):
    for seed in range(1000, 2000):
        sc = scenario(seed)
        folder = tmp_path / str(seed)
        _same_messages(run_real(sc, seed, folder), run_embedded(sc, seed, folder))


BATKUBE = {
    "burst": ("platform_graphene_16nodes_fixed.xml", "200_delay170.json"),
    "spaced": ("platform_graphene_16nodes_fixed.xml", "spaced_200_delay170.json"),
    "KIT": ("1node_6core_fixed.xml", "KIT_10h_80.json"),
}


@pytest.mark.parametrize("name", sorted(BATKUBE))
def test_batkube_inputs_with_the_reference_fcfs_give_the_same_messages(batsim, tmp_path, name):
    """Batsim's own batching on Batkube's inputs: burst's 16 completions at 170 s reach
    the decision process as 11, then 5, from both."""
    data = shared_data_dir()
    if data is None:
        pytest.skip("shared/data is not beside this checkout")
    platform_name, workload_name = BATKUBE[name]
    platform = data / "batsim-reference/platforms" / platform_name
    workload = json.loads((data / "batkube/workloads" / workload_name).read_text())
    from realbatsim import Scenario

    sc = Scenario(0, [workload], sharing=True, dynamic=False, profile_reuse=False)
    sc.write = lambda folder: (platform, [_dump(folder / "w0.json", workload)])  # type: ignore[method-assign]

    def fcfs():  # the reference decision process, on the raw messages
        decide = Fcfs()
        return lambda raw: p.encode(decide(p.decode(raw, "batsim")))

    real = run_real(sc, 0, tmp_path, decide=fcfs())
    _same_messages(real, run_embedded(sc, 0, tmp_path, decide=fcfs()))
    if name == "burst":
        sizes = [len(json.loads(m)["events"]) for m in real[0]][3:5]
        assert sizes == [11, 5]


def _dump(path: Path, obj) -> Path:  # type: ignore[no-untyped-def]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


# --------------------------------------------------------------------------- timewarp simulate


def _simulate(tmp_path, env, name, scheduler, platform, workload, *extra, batsim=None):  # type: ignore[no-untyped-def]
    out = tmp_path / name
    flags = ["--batsim", str(batsim)] if batsim else []
    proc = run_simulate(out, env, scheduler, platform, workload, *flags, *extra)
    manifest = json.loads((out / "manifest.json").read_text())
    return proc, out, manifest


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "out_jobs.csv", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("scheduler", [DEFAULT_LIKE, KCSS], ids=["default_like", "kcss"])
def test_two_sample_schedulers_on_a_generated_platform_give_the_same_jobs_csv(
    batsim, tmp_path, subprocess_env, scheduler
):
    """examples/inputs/cluster16.xml is `timewarp workload platform -n 16`'s output: real
    Batsim runs it unchanged, and both simulators give the same CSV (the second wave's
    completions at 170 s come as 11, then 5, from both)."""
    args = (scheduler, EXAMPLES / "cluster16.xml", EXAMPLES / "burst_40_delay170.json")
    real, real_out, manifest = _simulate(tmp_path, subprocess_env, "real", *args, batsim=batsim)
    assert real.returncode == 0, real.stderr[-3000:]
    assert manifest["simulator"] == str(batsim) and manifest["ok"] is True
    ours, our_out, _ = _simulate(tmp_path, subprocess_env, "embedded", *args)
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert (real_out / "out_jobs.csv").read_bytes() == (our_out / "out_jobs.csv").read_bytes()
    assert len(_rows(real_out)) == 40


def test_batkube_burst_gives_the_same_jobs_csv(batsim, tmp_path, subprocess_env):
    data = shared_data_dir()
    if data is None:
        pytest.skip("shared/data is not beside this checkout")
    args = (
        DEFAULT_LIKE,
        data / "batsim-reference/platforms/platform_graphene_16nodes_fixed.xml",
        data / "batkube/workloads/200_delay170.json",
    )
    real, real_out, _ = _simulate(tmp_path, subprocess_env, "real", *args, batsim=batsim)
    assert real.returncode == 0, real.stderr[-3000:]
    ours, our_out, _ = _simulate(tmp_path, subprocess_env, "embedded", *args)
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert (real_out / "out_jobs.csv").read_bytes() == (our_out / "out_jobs.csv").read_bytes()


POLLER = ROOT / "tests" / "programs" / "third_second_poller.py"


def test_a_timer_below_the_microsecond_runs_to_the_end_on_real_batsim(
    batsim, tmp_path, subprocess_env
):
    """A scheduler polling every 1/3 s: Batsim answers its calls stamped 0.333333 (below
    the deadline); deterministic mode used to wait for a later time, Batsim found a
    deadlock, exited 0, and `timewarp simulate` waited forever."""
    platform = tmp_path / "cluster4.xml"
    platform.write_text(generators.homogeneous_platform(4))
    workload = tmp_path / "burst.json"
    workload.write_text(json.dumps(generators.burst(10, 2.5)))  # 10 pods of 2.5 s
    args = (f"python {POLLER}", platform, workload)
    real, real_out, manifest = _simulate(tmp_path, subprocess_env, "real", *args, batsim=batsim)
    assert real.returncode == 0, real.stderr[-3000:]
    ours, our_out, _ = _simulate(tmp_path, subprocess_env, "embedded", *args)
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert (real_out / "out_jobs.csv").read_bytes() == (our_out / "out_jobs.csv").read_bytes()
    starts = sorted(float(r["starting_time"]) for r in _rows(real_out))
    # bound at the polls, k/3 s: 4 at 1/3 s, 4 at 3 s (2.5 s later, next poll), 2 at 5 2/3
    assert starts == [0.333333] * 4 + [3.0] * 4 + [5.666667] * 2


def test_lockstep_mode_on_real_batsim_keeps_every_node_busy(batsim, tmp_path, subprocess_env):
    """Lockstep with real Batsim: its times printed to the microsecond no longer swallow
    the broker's calls (11 of 16 nodes sat idle until Batsim's next event, t=170 s).
    Lockstep follows the wall clock, so the figures vary with the machine's load; what
    cannot vary is that each wave starts right after the previous one ends."""
    args = (DEFAULT_LIKE, EXAMPLES / "cluster16.xml", EXAMPLES / "burst_40_delay170.json")
    real, out, manifest = _simulate(
        tmp_path, subprocess_env, "lockstep", *args, "--mode", "lockstep", batsim=batsim
    )
    assert real.returncode == 0, real.stderr[-3000:]
    assert manifest["mode"] == "lockstep"
    starts = sorted(float(r["starting_time"]) for r in _rows(out))
    # waves of 16, 16 and 8 one-core 170 s jobs on 16 nodes: each wave starts within
    # (wall-clock) seconds of the previous one's end, never 170 s late
    assert max(starts[:16]) < 60
    assert 170 <= min(starts[16:32]) and max(starts[16:32]) < 170 + 60
    assert 340 <= min(starts[32:]) and max(starts[32:]) < 340 + 2 * 60


# --------------------------------------------------------------------------- Batsim's own errors


def test_a_batsim_abort_fails_the_run_with_batsims_message(batsim, tmp_path, subprocess_env):
    platform = tmp_path / "bad-config.xml"
    text = (EXAMPLES / "cluster16.xml").read_text()
    platform.write_text(
        text.replace(
            '<platform version="4.1">\n',
            '<platform version="4.1">\n  <config><prop id="network/no-such-key" value="1"/>'
            "</config>\n",
        )
    )
    args = (DEFAULT_LIKE, platform, EXAMPLES / "burst_40_delay170.json")
    proc, out, manifest = _simulate(tmp_path, subprocess_env, "abort", *args, batsim=batsim)
    assert proc.returncode == 1
    assert manifest["ok"] is False
    assert "Bad config key: network/no-such-key" in manifest["reason"]
    assert (
        "real Batsim was killed by SIGABRT before the end of the simulation" in (manifest["reason"])
    )
    assert f"FAILED: {manifest['reason']}" in proc.stderr
    assert "no message from Batsim" not in proc.stderr


def test_batsim_exiting_0_after_a_deadlock_is_a_failure_with_simgrids_message(
    batsim, tmp_path, subprocess_env
):
    """A scheduler that lists once and waits for good, never binding: SimGrid finds the
    deadlock, Batsim writes empty outputs and exits 0 — before the end of the
    simulation, so the run failed."""
    args = (
        f"python {ROOT / 'tests/programs/list_then_hang.py'}",
        EXAMPLES / "cluster16.xml",
        EXAMPLES / "burst_40_delay170.json",
    )
    proc, out, manifest = _simulate(
        tmp_path, subprocess_env, "deadlock", *args, "--on-no-progress", "warn", batsim=batsim
    )
    assert proc.returncode == 1
    assert "real Batsim exited with code 0 before the end" in manifest["reason"]
    assert "Deadlock detected" in manifest["reason"]


def test_a_role_master_platform_runs_on_real_batsim(batsim, tmp_path, subprocess_env):
    """A master marked role=master and named master_host: Batsim's default -m would give
    it the role twice and abort; --batsim passes a -m that names no host."""
    platform = tmp_path / "role-master.xml"
    platform.write_text(
        (EXAMPLES / "cluster16.xml")
        .read_text()
        .replace(
            '<host id="master_host" speed="1Gf">\n',
            '<host id="master_host" speed="1Gf">\n      <prop id="role" value="master"/>\n',
        )
    )
    assert 'value="master"' in platform.read_text()
    args = (DEFAULT_LIKE, platform, EXAMPLES / "burst_40_delay170.json")
    proc, out, manifest = _simulate(tmp_path, subprocess_env, "role", *args, batsim=batsim)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(_rows(out)) == 40
