"""experiments/reality.py (start-up model fitted on Batkube's spaced k3s runs, predicting
burst and KIT) and experiments/k3s_logs.py: the maths (fast) and a reduced run whose
table is checked against the runs it made (``-m slow``)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from simrun import needs_batkube_data, run_module

from experiments import k3s_logs, reality
from experiments.k3s_logs import Outcome

HEADER = (
    "job_id,workload_name,profile,submission_time,requested_number_of_resources,"
    "requested_time,success,final_state,starting_time,execution_time,finish_time,"
    "waiting_time,turnaround_time,stretch,allocated_resources,consumed_energy,metadata,"
    "scheduled,pulling,pulled,created\n"
)


def k3s_csv(path: Path, rows: list[dict]) -> Path:
    """Batkube's real-cluster columns; each row: id, submit, start, run, node, scheduled,
    pulling, pulled (None: the watcher missed it)."""
    lines = [HEADER]
    for r in rows:
        start, run = r["start"], r.get("run", 170.0)

        def cell(key: str, r: dict = r) -> str:
            return "" if r.get(key) is None else f"{r[key]}"

        lines.append(
            f"{r['id']},w0,delay,{r['submit']},1,0,1,COMPLETED_SUCCESSFULLY,{start},{run},"
            f"{start + run},{start - r['submit']},{start + run - r['submit']},1,"
            f"{cell('node')},-1,,{cell('scheduled')},{cell('pulling')},{cell('pulled')},"
            f"{cell('pulled')}\n"
        )
    path.write_text("".join(lines))
    return path


def outcome(starts: dict[str, float], submit: float = 0.0, run: float = 10.0) -> Outcome:
    return Outcome(
        {j: submit for j in starts}, dict(starts), {j: t + run for j, t in starts.items()}
    )


# ------------------------------------------------------------------ k3s_logs
def test_outcome_reads_makespan_and_mean_wait_from_started_jobs(tmp_path):
    path = k3s_csv(
        tmp_path / "r.csv",
        [{"id": 1, "submit": 0, "start": 5}, {"id": 2, "submit": 10, "start": 30, "run": 100}],
    )
    run = Outcome.read(path)
    assert run.makespan == 175
    assert run.mean_wait == pytest.approx((5 + 20) / 2)
    assert Outcome.read(path, frozenset({"2"})).makespan == 130


def test_start_error_by_rank_ignores_which_job_started():
    real = [outcome({"a": 0, "b": 10}), outcome({"a": 10, "b": 0})]
    ours = outcome({"a": 1, "b": 11})
    assert k3s_logs.mean_starts(real, "rank") == [0, 10]
    assert k3s_logs.start_rmse(ours, k3s_logs.mean_starts(real, "rank")) == pytest.approx(1)
    # by job both real runs average to 5: ours is off by 4 and 6
    by_job = k3s_logs.mean_starts(real, "job")
    assert k3s_logs.start_rmse(ours, by_job) == pytest.approx(math.sqrt((16 + 36) / 2))


def test_noise_is_each_run_against_the_mean_of_the_others():
    runs = [outcome({"a": 0}), outcome({"a": 2}), outcome({"a": 4})]
    assert k3s_logs.noise_rmse(runs, "job") == pytest.approx([3, 0, 3])
    assert k3s_logs.noise_rmse(runs[:1], "job") == []


def test_a_pod_finishing_as_another_starts_is_not_concurrent():
    chain = Outcome({"a": 0, "b": 0}, {"a": 0, "b": 10}, {"a": 10, "b": 20})
    assert k3s_logs.max_concurrency([chain]) == 1
    assert k3s_logs.max_concurrency([chain, outcome({"x": 0, "y": 5})]) == 2


def test_startup_phases_split_first_pods_per_node_from_later_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(k3s_logs, "BATKUBE", tmp_path)
    (tmp_path / "results").mkdir()
    # two nodes; run 0 pulls cold (5 s), run 1 has the image (1 s); later pods pull 1 s
    for index, first_pull in enumerate((5.0, 1.0)):
        rows = []
        for node in (0, 1):
            t = node * 1.0
            rows.append({"id": f"f{node}", "submit": t, "scheduled": t + 0.04, "pulling": t + 3,
                         "pulled": t + 3 + first_pull, "start": t + 3 + first_pull + 0.1,
                         "node": node, "run": 170.5})  # fmt: skip
            done = t + 3 + first_pull + 0.1 + 170.5
            rows.append({"id": f"l{node}", "submit": t, "scheduled": done, "pulling": done + 0.5,
                         "pulled": done + 1.5, "start": done + 1.6, "node": node,
                         "run": 170.5})  # fmt: skip
        rows.append({"id": "lost", "submit": 0, "start": 900, "run": 170.5})  # no events
        k3s_csv(tmp_path / "results" / f"s_{index}_jobs.csv", rows)
    phases = k3s_logs.startup_phases("s_*_jobs.csv", 170)
    assert phases.slots == 2
    assert phases.cold_pull_runs == [0]
    assert phases.cold_pull_s == pytest.approx(5)
    assert phases.later["scheduled→started"] == pytest.approx(1.6)
    assert phases.first["scheduled→pulling"] == pytest.approx(2.96)
    assert phases.binding_s == pytest.approx(0.04)
    assert phases.overrun_s == pytest.approx(0.5)
    assert phases.per_pod_s == pytest.approx(2.1)
    assert phases.first_pods == 4 and phases.later_pods == 4
    # the node frees at `done` and the next pod is bound then (no scheduler delay) and
    # starts 1.6 s later
    assert k3s_logs.rebind_gaps("s_*_jobs.csv") == pytest.approx([0, 0, 0, 0])
    run = Outcome.read(tmp_path / "results" / "s_0_jobs.csv")
    assert run.idle == pytest.approx((1.6, 1.6))


# ------------------------------------------------------------------ reality: inputs
PLATFORM = """<platform version="4.1"><zone id="z" routing="Full">
<host id="m" speed="1f"><prop id="core" value="1"/><prop id="role" value="master"/></host>
<host id="a" speed="1f"><prop id="core" value="1"/></host>
<host id="b" speed="1f"><prop id="core" value="6"/><prop id="memory" value="4Gi"/></host>
</zone></platform>"""


def test_reserved_cpu_comes_off_the_last_compute_host_only():
    out = reality.reserve_cpu(PLATFORM, 100)
    assert '<host id="b" speed="1f"><prop id="core" value="5.9"/>' in out
    assert out.replace('value="5.9"', 'value="6"') == PLATFORM
    assert reality.reserve_cpu(PLATFORM, 0) == PLATFORM
    with pytest.raises(ValueError, match="reserved"):
        reality.reserve_cpu(PLATFORM, 6000)


def test_a_host_without_a_core_prop_has_one_cpu():
    platform = '<platform><host id="x" speed="1f"></host></platform>'
    assert 'value="0.9"' in reality.reserve_cpu(platform, 100)


def test_startup_keys_go_on_every_profile_of_a_copy():
    workload = {
        "jobs": [{"id": str(i), "subtime": i, "res": 1, "profile": "d"} for i in range(5)],
        "profiles": {"d": {"type": "delay", "delay": 1}, "e": {"type": "delay", "delay": 2,
                     "timewarp": {"usage": {"cpu": 1}}}},
    }  # fmt: skip
    doc = reality.with_startup(workload, 2.5, 1.25, jobs=3)
    assert [j["id"] for j in doc["jobs"]] == ["0", "1", "2"]
    assert doc["profiles"]["d"]["timewarp"] == {
        "imagePullSeconds": 2.5,
        "containerStartSeconds": 1.25,
    }
    assert doc["profiles"]["e"]["timewarp"]["usage"] == {"cpu": 1}
    assert "timewarp" not in workload["profiles"]["d"]  # the input is left alone
    assert reality.with_startup(workload, 0, 0) == workload


# ------------------------------------------------------------------ reality: the search
@given(
    a=st.floats(min_value=-3, max_value=12),
    b=st.floats(min_value=-3, max_value=12),
    x0=st.floats(min_value=0, max_value=10),
    y0=st.floats(min_value=0, max_value=10),
)
def test_compass_search_ends_on_the_grid_point_nearest_a_convex_minimum(a, b, x0, y0):
    def f(x: tuple[float, float]) -> float:
        return (x[0] - a) ** 2 + 3 * (x[1] - b) ** 2

    def recorded(into: list) -> object:
        return lambda x: into.append(x) or f(x)

    calls: list = []
    (x, y), value = reality.compass_search(recorded(calls), (x0, y0), step=2, min_step=0.25)
    assert abs(x - max(0, a)) <= 0.125 + 1e-9 and abs(y - max(0, b)) <= 0.125 + 1e-9
    assert value == f((x, y))
    assert all(c[0] >= 0 and c[1] >= 0 and (c[0] / 0.25).is_integer() for c in calls)
    again: list = []  # deterministic: the same points in the same order
    assert reality.compass_search(recorded(again), (x0, y0), step=2, min_step=0.25) == (
        (x, y),
        value,
    )
    assert again == calls


def test_compass_search_refuses_a_step_below_its_resolution():
    with pytest.raises(ValueError):
        reality.compass_search(lambda x: 0.0, (0, 0), step=0.1, min_step=0.25)


@pytest.mark.parametrize(
    "argv",
    [["--jobs", "-1"], ["--model", "nosuch"], ["--min-step", "0"], ["--step", "0.1"]],
)
def test_bad_arguments_exit_2(argv, subprocess_env):
    r = run_module(subprocess_env, "experiments.reality", *argv)
    assert r.returncode == 2
    assert "error:" in r.stderr


# ------------------------------------------------------------------ reduced run (slow)
def _reality(out: Path, capsys) -> tuple[int, str]:
    code = reality.main(
        ["--jobs", "16", "--step", "1", "--min-step", "0.5", "--model", "default",
         "--model", "latency", "--timeout", "300", "-o", str(out)]
    )  # fmt: skip
    return code, capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.timeout(3600)
@needs_batkube_data
def test_reduced_run_table_is_what_its_runs_wrote_and_is_deterministic(tmp_path, capsys):
    code, stdout = _reality(tmp_path / "a", capsys)
    assert code == 0, stdout
    record = json.loads((tmp_path / "a" / "results.json").read_text())
    fitted = record["models"]["latency"]
    best = (fitted["pull_s"], fitted["start_s"])
    tried = {(t["pull_s"], t["start_s"]): t["start_rmse_s"] for t in fitted["tried"]}
    # the fit is the best point tried, and no grid neighbour at the last step is better
    assert fitted["start_rmse_s"] == min(tried.values()) == tried[best]
    for dp, ds in ((0.5, 0), (-0.5, 0), (0, 0.5), (0, -0.5)):
        neighbour = (best[0] + dp, best[1] + ds)
        if min(neighbour) >= 0:
            assert tried[neighbour] >= fitted["start_rmse_s"]

    # each of our rows is what the run it names wrote, recomputed here from out_jobs.csv
    ref = {name: reality.Reference.load(name, 16) for name in ("spaced", "burst", "realistic")}
    for row in record["rows"]:
        if not row["source"].startswith("timewarp"):
            continue
        model = "default" if "default" in row["source"] else "latency"
        params = (0, 0) if model == "default" else best
        jobs = tmp_path / "a" / model / row["setup"] / f"p{params[0]:g}-s{params[1]:g}"
        run = Outcome.read(jobs / "run" / "out_jobs.csv")
        assert set(run.starts) == reality.job_ids(reality.SETUPS[row["setup"]], 16)
        assert row["makespan"] == pytest.approx(run.makespan)
        assert row["mean_wait"] == pytest.approx(run.mean_wait)
        real = ref[row["setup"]].real
        truth = statistics.fmean(r.makespan for r in real)
        assert row["makespan_error"] == pytest.approx(run.makespan - truth)
        assert row["start_rmse_rank"] == pytest.approx(ref[row["setup"]].error(run, "rank"))
        assert f"{row['makespan']:.1f}" in stdout
        if row["setup"] != "realistic":
            idle = statistics.fmean(run.idle) if run.idle else None  # (no pod waited)
            assert row["node_idle"] == pytest.approx(idle)
        # k3s's binding delay (whole ms) as --api-latency for that model only, on the
        # platform with CoreDNS's 100m off its last node
        args = json.loads((jobs / "run" / "manifest.json").read_text())["arguments"]
        if model == "latency":
            latency = args[args.index("--api-latency") + 1]
            assert latency == f"{record['k3s_logs']['api_latency_ms']}ms"
        else:
            assert "--api-latency" not in args
        platform = (jobs / "platform.xml").read_text()
        assert ('value="0.9"' in platform or 'value="5.9"' in platform) == (model == "latency")
        # the workload it ran carries the fitted keys on every profile
        doc = json.loads((jobs / "workload.json").read_text())
        for profile in doc["profiles"].values():
            if model == "latency":
                assert profile["timewarp"] == {
                    "imagePullSeconds": best[0], "containerStartSeconds": best[1]
                }  # fmt: skip
            else:
                assert "timewarp" not in profile

    # the whole command again: the same fit, the same table
    code, again = _reality(tmp_path / "b", capsys)
    assert code == 0, again
    second = json.loads((tmp_path / "b" / "results.json").read_text())
    assert second["models"] == record["models"]
    assert second["rows"] == record["rows"]
    table = [line for line in stdout.splitlines() if line.startswith("|")]
    assert table and table == [line for line in again.splitlines() if line.startswith("|")]
