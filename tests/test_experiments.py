"""The experiment scripts: their comparison maths (fast) and smoke runs (``-m slow``)."""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from simrun import ROOT, needs_batkube_data, run_module

from experiments import _common, batkube, fidelity, kse, kubcg, scale
from experiments._common import Summary, jobs_figures, role_of

JOBS_HEADER = (
    "job_id,workload_name,profile,submission_time,requested_number_of_resources,requested_time,"
    "success,final_state,starting_time,execution_time,finish_time,waiting_time,turnaround_time,"
    "stretch,allocated_resources,consumed_energy,metadata\n"
)


def jobs_csv(path: Path, rows: list[tuple[str, str, float, float, float, str]]) -> Path:
    """rows: (job id, profile, submit, start, finish, resources)."""
    lines = [JOBS_HEADER]
    for job, profile, submit, start, finish, res in rows:
        lines.append(
            f"{job},w0,{profile},{submit},1,1000,1,COMPLETED_SUCCESSFULLY,{start},"
            f'{finish - start},{finish},{start - submit},{finish - submit},1,{res},-1,""\n'
        )
    path.write_text("".join(lines))
    return path


# ------------------------------------------------------------------ Batkube comparison
@needs_batkube_data
@pytest.mark.parametrize(
    "setup, makespan, makespan_sd, wait, wait_sd",
    [
        ("burst", 2215, 0.508, 970, 12.6),
        ("spaced", 2257, 16.9, 48.1, 9.44),
        ("realistic", 32555, 1.30, 2020, 950),
    ],
)
def test_batkube_simulated_figures_match_their_thesis_table(
    setup, makespan, makespan_sd, wait, wait_sd
):
    """Our reading of Batkube's CSVs gives Table 4.1's "simulated" columns."""
    simu = batkube.reference_rows(batkube.SETUPS[setup])[0]
    assert simu.makespan.n == 20
    assert simu.makespan.mean == pytest.approx(makespan, abs=0.5)
    assert simu.makespan.stdev == pytest.approx(makespan_sd, rel=0.01)
    assert simu.mean_wait.mean == pytest.approx(wait, rel=0.001, abs=0.5)
    assert simu.mean_wait.stdev == pytest.approx(wait_sd, rel=0.01)


@needs_batkube_data
def test_batkube_real_cluster_and_batsim_reference_rows():
    real, ref = batkube.reference_rows(batkube.SETUPS["burst"])[1:]
    assert real.makespan.n == 10
    assert real.makespan.mean == pytest.approx(2467, abs=0.5)  # Table 4.1 "emulated"
    assert real.mean_wait.mean == pytest.approx(1077, abs=0.5)
    assert (ref.makespan.mean, ref.mean_wait.mean) == (2210.0, 979.2)  # batsim-reference README


@needs_batkube_data
def test_batkube_wall_times_are_their_table_parameters_rows():
    walls = batkube.batkube_walls("max-timestep_200_delay170.csv")
    assert walls.n == 5  # the rows at max timestep 1000 s
    assert 30 < walls.min <= walls.median <= walls.max < 50


def test_jobs_figures_ignore_jobs_that_never_started(tmp_path):
    path = jobs_csv(tmp_path / "j.csv", [("1", "p", 0, 10, 40, "0"), ("2", "p", 5, 45, 60, "1")])
    with open(path, "a") as f:
        f.write('3,w0,p,7,1,1000,0,REJECTED,,,,,,,,-1,""\n')
    assert jobs_figures(path) == (60.0, (10 + 40) / 2)


def test_distinct_outputs_counts_different_bytes(tmp_path):
    runs = []
    for i, text in enumerate(["a\n", "a\n", "b\n"]):
        out = tmp_path / str(i)
        out.mkdir()
        (out / "out_jobs.csv").write_text(text)
        runs.append(_common.Run(out=out, returncode=0, wall_s=1.0, manifest={"ok": True}))
    assert batkube.distinct_outputs(runs[:2]) == 1
    assert batkube.distinct_outputs(runs) == 2
    runs[2].returncode = 1  # failed runs do not count
    assert batkube.distinct_outputs(runs) == 1


# ------------------------------------------------------------------ statistics
def test_summary_of_one_value_has_zero_spread_and_ignores_nan():
    s = Summary.of([3.0, math.nan])
    assert (s.n, s.mean, s.stdev, s.min, s.median, s.max) == (1, 3.0, 0.0, 3.0, 3.0, 3.0)
    assert Summary.of([]).mean_sd() == "-"


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=30))
def test_summary_orders_and_matches_statistics(values):
    s = Summary.of(values)
    assert s.min <= s.median <= s.max
    assert s.min - 1e-6 <= s.mean <= s.max + 1e-6
    if len(values) > 1:
        assert s.stdev == pytest.approx(statistics.stdev(values), rel=1e-9, abs=1e-9)


def test_processes_are_attributed_by_their_command_line():
    py = "/x/.venv/bin/python"
    assert role_of([py, "-m", "timewarp", "simulate", "-q"]) == "broker"
    assert role_of([py, "-m", "timewarp", "sim", "-p", "x.xml"]) == "simulator"
    assert role_of(["/opt/batsim", "-p", "x.xml"]) == "simulator"
    assert role_of([py, "-m", "timewarp", "run", "--name", "s", "--", "python", "-m", "x"]) == (
        "scheduler"
    )
    assert role_of(["python", "-m", "sample_schedulers.kcss"]) == "scheduler"


def test_proc_stat_reads_this_process():
    if not Path("/proc/self/stat").exists():
        pytest.skip("no /proc")
    ppid, cpu = _common._proc_stat(os.getpid())
    assert ppid == os.getppid() and cpu > 0


# ------------------------------------------------------------------ scale
def test_scale_sizes_and_rates():
    assert scale.parse_sizes("100:1000, 10000:100000") == [(100, 1000), (10000, 100000)]
    for bad in ("100", "0:10", "a:b", "10:-1"):
        with pytest.raises(Exception, match="NODES:JOBS"):
            scale.parse_sizes(bad)
    # λ·d / N = 80 % load
    assert scale.poisson_rate(1000) * scale.MEAN_DELAY_S / 1000 == pytest.approx(0.8)


@pytest.mark.parametrize(
    "argv",
    [
        ["nasa", "--fraction", "0"],
        ["nasa", "--fraction", "1.5"],
        ["nasa", "--shape", "torus"],
        ["synthetic", "--sizes", "10"],
        ["synthetic", "--budget", "-1"],
        [],
    ],
)
def test_scale_rejects_bad_arguments_with_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        scale.main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


# ------------------------------------------------------------------ kubcg
def test_kubcg_workloads_mark_gpu_capable_pods_only():
    workload = {
        "profiles": {
            "gpu_image": {"image_class": "gpu", "delay": 600},
            "cpu_image": {"image_class": "cpu", "delay": 300},
        }
    }
    kubcg.annotate(workload)
    gpu, cpu = workload["profiles"]["gpu_image"], workload["profiles"]["cpu_image"]
    assert gpu["annotations"] == {kubcg.GPU_IMAGE_ANNOTATION: "registry.example/gpu-app:cuda"}
    assert "annotations" not in cpu and cpu["image"] != gpu["image"]
    assert kubcg.per_second(3) == pytest.approx(3 / 600)


def test_kubcg_counts_gpu_jobs_on_the_gpu_node(tmp_path):
    # resources 0..2 are CPU nodes, 3 the GPU node (host order of the generated platform)
    path = jobs_csv(
        tmp_path / "j.csv",
        [
            ("1", "gpu_image", 0, 0, 100, "3"),
            ("2", "gpu_image", 0, 0, 600, "1"),
            ("3", "cpu_image", 0, 0, 300, "3"),
        ],
    )
    assert kubcg.gpu_jobs_on_gpu(path, cpu_nodes=3, gpu_nodes=1) == (1, 2)
    assert kubcg.gpu_jobs_on_gpu(path, cpu_nodes=4, gpu_nodes=0) == (0, 2)


def test_kubcg_rejects_bad_rates(capsys):
    with pytest.raises(SystemExit) as exc:
        kubcg.main(["--rates", "3,-5"])
    assert exc.value.code == 2
    assert "--rates" in capsys.readouterr().err


# ------------------------------------------------------------------ kse
def test_kse_growing_usage_reaches_the_final_value_in_quarters():
    assert kse.usage_curve(0.8, growing=False) == [[0, 0.8]]
    curve = kse.usage_curve(0.8, growing=True)
    assert [v for _, v in curve] == [0.2, 0.4, 0.6, 0.8]
    assert [t for t, _ in curve] == [
        0,
        kse.GROWTH_STEP_S,
        2 * kse.GROWTH_STEP_S,
        3 * kse.GROWTH_STEP_S,
    ]


def test_kse_imbalance_is_read_per_round_from_the_rebalancers_csv(tmp_path):
    path = tmp_path / "kse_imbalance.csv"
    header = "timestamp,round,algorithm,metric,nodes,mean_load,mae,spread,planned_mae,"
    header += "planned_moves,evictions,node_loads\n"
    rows = [f"{60 * k}.000,{k},refine,cpu,4,1000,{mae},0,0,0,{ev},\"[]\"\n"
            for k, mae, ev in [(1, 400, 2), (2, 200, 1), (21, 100, 0), (22, 50, 0)]]  # fmt: skip
    path.write_text(header + "".join(rows))
    series = kse.imbalance_rounds(path)
    assert series == [(1, 400.0, 2), (2, 200.0, 1), (21, 100.0, 0), (22, 50.0, 0)]
    assert kse.mean_between(series, 1, 10) == 300.0
    assert kse.mean_between(series, 21, 30) == 75.0
    assert math.isnan(kse.mean_between(series, 40, 50))


def test_kse_pods_are_replicaset_owned_with_equal_requests():
    workload = kse.make_workload(5, "exponential", True, 2.0, "memory", seed=3)
    profiles = list(workload["profiles"].values())
    assert {p["replicaset"] for p in profiles} == {"app"}
    assert {(p["cpu"], p["memory"]) for p in profiles} == {("300m", "256Mi")}
    assert [j["subtime"] for j in workload["jobs"]] == [0, 2, 4, 6, 8]
    assert all(v.endswith("Mi") for p in profiles for _, v in p["timewarp"]["usage"]["memory"])


def test_kse_rejects_unknown_factor_levels(capsys):
    with pytest.raises(SystemExit) as exc:
        kse.main(["--shapes", "constant,sawtooth"])
    assert exc.value.code == 2
    assert "--shapes" in capsys.readouterr().err


# ------------------------------------------------------------------ fidelity
@given(
    st.lists(st.floats(0, 1e5), min_size=1, max_size=10),
    st.floats(1, 1e4),
    st.floats(0.5, 100),
)
def test_compression_divides_every_time_by_the_factor(subtimes, delay, factor):
    workload = {
        "jobs": [
            {"id": str(i), "subtime": t, "res": 1, "profile": "p"} for i, t in enumerate(subtimes)
        ],
        "profiles": {"p": {"type": "delay", "delay": delay}},
    }
    out = fidelity.compress(workload, factor)
    assert [j["subtime"] * factor for j in out["jobs"]] == pytest.approx(subtimes)
    assert out["profiles"]["p"]["delay"] * factor == pytest.approx(delay)
    assert workload["profiles"]["p"]["delay"] == delay  # the input is left alone


def test_compression_refuses_profiles_it_cannot_scale():
    with pytest.raises(ValueError, match="'p'"):
        fidelity.compress({"jobs": [], "profiles": {"p": {"type": "parallel_homogeneous"}}}, 2)


def test_decisions_are_compared_by_node_order_and_shift():
    reference = {"1": (0.0, "0"), "2": (0.0, "1"), "3": (10.0, "0"), "4": (20.0, "1")}
    other = {"1": (0.5, "0"), "2": (0.2, "1"), "3": (21.0, "1"), "4": (20.5, "0")}
    same, total, reordered, shifts = fidelity.compare(reference, other, factor=10)
    assert (same, total) == (2, 4)
    assert reordered == 1  # 3 and 4 swapped; 1 and 2 were simultaneous in the reference
    assert shifts == pytest.approx([5.0, 2.0, 110.0, 5.0])


# ------------------------------------------------------------------ CLI usage errors
@pytest.mark.parametrize(
    "module, argv",
    [
        ("experiments.batkube", ["--runs", "-1"]),
        ("experiments.batkube", ["--setup", "nosuch"]),
        ("experiments.fidelity", ["--compress", "0"]),
        ("experiments.kubcg", ["--seeds", "x"]),
    ],
)
def test_scripts_exit_2_on_bad_arguments(module, argv, subprocess_env):
    r = run_module(subprocess_env, module, *argv)
    assert r.returncode == 2
    assert "error:" in r.stderr


# ------------------------------------------------------------------ smoke runs (slow)
def _script(args: list[str], env: dict, timeout: float = 280) -> subprocess.CompletedProcess:
    """Run a script in its own process group; on timeout stop the whole group (SIGINT, as
    Ctrl-C: `timewarp simulate` then stops its simulator and schedulers) and fail."""
    proc = subprocess.Popen(
        [sys.executable, *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        pytest.fail(f"{args} did not finish in {timeout} s")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.slow
@needs_batkube_data
def test_batkube_burst_two_deterministic_runs_are_identical(subprocess_env, tmp_path):
    r = _script(
        ["-m", "experiments.batkube", "--runs", "2", "--lockstep-runs", "0", "--setup", "burst",
         "-o", str(tmp_path)],
        subprocess_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout
    assert "identical (σ = 0)" in r.stdout
    assert "Batkube simulated (kube-scheduler)" in r.stdout
    record = json.loads((tmp_path / "results.json").read_text())
    runs = record["setups"]["burst"]["deterministic"]
    assert [r["figures"]["makespan"] for r in runs] == [2210.0, 2210.0]  # = real Batsim FCFS


@pytest.mark.slow
def test_scale_synthetic_smallest_rung(subprocess_env, tmp_path):
    r = _script(
        ["-m", "experiments.scale", "synthetic", "--sizes", "10:50", "--budget", "300",
         "-o", str(tmp_path)],
        subprocess_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "| Poisson, 80 % load | 10    | 50   | ok" in r.stdout


@pytest.mark.slow
def test_kubcg_one_rate(subprocess_env, tmp_path):
    r = _script(
        ["-m", "experiments.kubcg", "--rates", "50", "--jobs", "8", "-o", str(tmp_path)],
        subprocess_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads((tmp_path / "results.json").read_text())
    assert len(rows) == 4 and all(row["ok"] for row in rows)
    assert all(row["figures"]["nb_jobs_success"] == 8 for row in rows)


@pytest.mark.slow
def test_kse_smallest_factorial(subprocess_env, tmp_path):
    r = _script(
        ["-m", "experiments.kse", "--pods", "8", "--distributions", "exponential", "--shapes",
         "constant", "-o", str(tmp_path)],
        subprocess_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "cpu-8-exponential-constant-kse-binds" / "kse_imbalance.csv").exists()


@pytest.mark.slow
@needs_batkube_data
def test_fidelity_small_workload(subprocess_env, tmp_path):
    workload = tmp_path / "burst30.json"
    made = _script(
        ["-m", "timewarp", "workload", "burst", "-n", "30", "--delay", "20", "-o", str(workload)],
        subprocess_env,
    )
    assert made.returncode == 0, made.stderr
    r = _script(
        ["-m", "experiments.fidelity", "-w", str(workload), "--compress", "2", "--speed", "5",
         "--runs", "1", "-o", str(tmp_path / "out")],
        subprocess_env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "| deterministic" in r.stdout and "| realtime ×5" in r.stdout


@pytest.mark.slow
@needs_batkube_data
def test_benchmark_one_run_each(subprocess_env, tmp_path):
    r = _script(
        ["benchmarks/simulate.py", "--runs", "1", "--json", str(tmp_path / "b.json")],
        subprocess_env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    record = json.loads((tmp_path / "b.json").read_text())
    assert set(record["cases"]) == {"burst", "spaced"}
    assert record["cases"]["burst"]["cpu_total"]["n"] == 1


def test_modes_are_read_from_the_usage_line_not_from_prose():
    usage = "usage: timewarp simulate [--mode {deterministic}]\n  --mode {deterministic}  time mode (lockstep and realtime: see docs)"
    assert _common.mode_choices(usage) == {"deterministic"}
    assert _common.mode_choices("[--mode {deterministic,lockstep,realtime}]") == {
        "deterministic",
        "lockstep",
        "realtime",
    }


def test_scale_counts_progress_of_a_stopped_run_from_the_scheduler_log(tmp_path):
    assert scale.bound_pods(tmp_path) == 0
    (tmp_path / "scheduler-0.log").write_text(
        "x INFO scheduler 'default' started\n"
        "x INFO bound default/w0-1 to node0 [best scores node0=97]\n"
        "x INFO default/w0-2 unschedulable (attempt 1): 0/1 nodes are available\n"
        "x INFO bound default/w0-3 to node0 [best scores node0=97]\n"
    )
    assert scale.bound_pods(tmp_path) == 2


def test_realtime_commands_use_this_interpreter():
    assert _common.unwrapped_command("python -m sample_schedulers.kcss --scheduler-name x") == (
        f"{sys.executable} -m sample_schedulers.kcss --scheduler-name x"
    )
    assert _common.unwrapped_command("/opt/sched --flag") == "/opt/sched --flag"
