"""The KSE factorial's tools: the synthetic workload (experiments/kse_workload.py) and the
report (experiments/kse_factorial_report.py)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from experiments import kse_factorial_report as report
from experiments import kse_workload

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "experiments" / "kse_workload.py"


def workload(**kw) -> dict:
    argv = []
    for key, value in {"seed": 1, "output": "unused.json", **kw}.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    return kse_workload.make_workload(kse_workload.build_parser().parse_args(argv))


def cpu_per_pod(w: dict, pods: int) -> list[float]:
    """Each pod's mean CPU usage over the run."""
    out = []
    for i in range(pods):
        curve = w["profiles"][f"pod{i}"]["timewarp"]["usage"]["cpu"]
        out.append(sum(v for _, v in curve) / len(curve))
    return out


def test_exponential_requests_load_the_first_pods_and_normal_ones_the_middle():
    exp = cpu_per_pod(workload(pods=20, rate=40, shape="constant", distribution="exponential"), 20)
    nor = cpu_per_pod(workload(pods=20, rate=40, shape="constant", distribution="normal"), 20)
    assert max(range(20), key=exp.__getitem__) <= 1
    assert 7 <= max(range(20), key=nor.__getitem__) <= 12
    assert sum(exp[:5]) > 2 * sum(nor[:5])


def test_every_pod_is_in_the_replicaset_and_a_keeper_holds_the_run():
    w = workload(pods=5, rate=20, shape="linear", distribution="normal", duration=300)
    pods = [j for j in w["jobs"] if j["id"] != "keeper"]
    assert [j["replicaset"] for j in pods] == ["app"] * 5
    keeper = next(j for j in w["jobs"] if j["id"] == "keeper")
    assert "replicaset" not in keeper and w["profiles"]["keeper"]["delay"] == 300


@settings(max_examples=25, deadline=None)
@given(
    pods=st.integers(1, 30),
    rate=st.floats(0.5, 50),
    shape=st.sampled_from(kse_workload.SHAPES),
    distribution=st.sampled_from(kse_workload.DISTRIBUTIONS),
    seed=st.integers(0, 10**6),
)
def test_every_request_of_a_step_costs_on_exactly_one_pod(pods, rate, shape, distribution, seed):
    w = workload(
        pods=pods, rate=rate, shape=shape, distribution=distribution, seed=seed, duration=120
    )
    step = 30.0
    for k in range(4):
        t = (k + 0.5) * step
        expected = round(kse_workload.request_rate(shape, rate, t, 120.0) * step)
        used = sum(
            w["profiles"][f"pod{i}"]["timewarp"]["usage"]["cpu"][k][1] - 0.02 for i in range(pods)
        )
        # cpu = base 0.02 + 0.1 core per request/s, rounded to 4 decimals per pod
        assert abs(used - 0.1 * expected / step) < 1e-4 * pods + 1e-9
    if shape == "linear":  # a ramp: the first step carries the fewest requests
        first = sum(w["profiles"][f"pod{i}"]["timewarp"]["usage"]["cpu"][0][1] for i in range(pods))
        last = sum(w["profiles"][f"pod{i}"]["timewarp"]["usage"]["cpu"][3][1] for i in range(pods))
        assert first <= last


def test_the_cli_writes_the_same_bytes_for_a_seed_and_refuses_bad_input(tmp_path, subprocess_env):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(SCRIPT), "--pods", "4", "--rate", "20", "--shape", "constant"]
            + ["--distribution", "normal", *args],
            capture_output=True,
            text=True,
            env=subprocess_env,
            timeout=60,
        )

    assert run("--seed", "3", "-o", str(tmp_path / "a.json")).returncode == 0
    assert run("--seed", "3", "-o", str(tmp_path / "b.json")).returncode == 0
    assert run("--seed", "4", "-o", str(tmp_path / "c.json")).returncode == 0
    a, b, c = ((tmp_path / n).read_bytes() for n in ("a.json", "b.json", "c.json"))
    assert a == b and a != c
    bad = run("--seed", "3", "--step", "0", "-o", str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and "--step" in bad.stderr
    bad = run("--seed", "3", "--request-cpu", "lots", "-o", str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and "cpu" in bad.stderr
    assert not list(tmp_path.glob("bad.json*")) and not list(tmp_path.glob(".bad.json*"))


# ----------------------------------------------------------------------------- report


def fake_results(tmp_path: Path) -> Path:
    """Two scenarios x (kube-scheduler, kse greedy) x 2 replicates with chosen MAE rounds."""
    results = tmp_path / "results"
    rows = []
    maes = {  # (distribution, scheduler) -> per replicate, MAE of rounds 1..10
        ("exponential", "kube-scheduler"): [[300] * 10, [320] * 10],
        ("exponential", "kse"): [[800] + [50] * 9, [820] + [60] * 9],
        ("normal", "kube-scheduler"): [[100] * 10, [110] * 10],
        ("normal", "kse"): [[400] + [100] * 9, [380] + [90] * 9],
    }
    for (dist, sched), reps in maes.items():
        for r, series in enumerate(reps):
            run_id = f"{dist[:3]}{sched[:3]}{r}"
            rows.append(
                {
                    "run_id": run_id,
                    "scheduler": sched,
                    "algorithm": "greedy" if sched == "kse" else "",
                    "metric": "cpu",
                    "pods": "20",
                    "rate": "40",
                    "shape": "constant",
                    "distribution": dist,
                    "replicate": str(r),
                    "status": "ok",
                }
            )
            d = results / "runs" / run_id
            d.mkdir(parents=True)
            with open(d / "kse_imbalance.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["timestamp", "round", "mae", "evictions"])
                for k, mae in enumerate(series, start=1):
                    w.writerow([0, k, mae, 3 if sched == "kse" else 0])
    rows.append({**rows[-1], "run_id": "failed1", "status": "failed"})
    with open(results / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return results


def test_the_report_averages_rounds_1_to_9_and_counts_clear_wins(tmp_path, capsys):
    results = fake_results(tmp_path)
    assert report.main([str(results)]) == 0
    out = capsys.readouterr().out
    with open(results / "kse_report.csv", newline="") as f:
        table = {(r["distribution"], r["scheduler"]): r for r in csv.DictReader(f)}
    greedy = table[("exponential", "kse-greedy")]
    # rounds 1-9 only (round 10 ignored): (800 + 8 * 50) / 9 and (820 + 8 * 60) / 9
    assert float(greedy["mae_mean"]) == round(((1200 / 9) + (1300 / 9)) / 2, 3)
    assert float(greedy["mae_round1_mean"]) == 810.0
    assert float(greedy["mae_late_mean"]) == 55.0
    assert float(greedy["evictions_mean"]) == 27.0  # 3 per round, 9 rounds
    assert float(table[("exponential", "kube-scheduler")]["mae_sd"]) > 0
    # a clear win with the exponential requests; not with the normal ones (192 vs 105)
    assert "| kse-greedy | 0 of 0 | 0 of 1 | 0 of 0 | 1 of 1 |" in out
    assert "1 runs without imbalance data" in out
    assert (results / "kse_mae.png").read_bytes()[:4] == b"\x89PNG"
    assert (results / "kse_rounds.png").read_bytes()[:4] == b"\x89PNG"


def test_the_report_without_a_sweep_is_a_usage_error(tmp_path, capsys):
    assert report.main([str(tmp_path)]) == 2
    assert "run the sweep" in capsys.readouterr().err
