"""The sweep file: validation names the field; expansion gives the full grid and explicit rows."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from commands.sweeping.plan import plan_runs
from commands.sweeping.spec import MAX_RUNS, SpecError, load_sweep, parse_sweep

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = "examples/inputs/cluster16.xml"
WORKLOAD = "examples/inputs/burst_40_delay170.json"


def base_spec(**overrides) -> dict:
    spec = {
        "root": str(ROOT),
        "schedulers": {"tiny": "python tests/programs/tiny_scheduler.py"},
        "platforms": {"c16": PLATFORM},
        "workloads": {"b40": WORKLOAD},
        "modes": {"deterministic": {}},
    }
    spec.update(overrides)
    return spec


def parse(spec: dict, tmp_path: Path | None = None):
    source = (tmp_path or ROOT) / "sweep.yaml"
    return parse_sweep(spec, source)


def test_the_smallest_sweep_has_one_point_per_replicate():
    sweep = parse(base_spec(replicates=3))
    assert len(sweep.points) == 1
    assert sweep.points[0].factors == {
        "scheduler": "tiny",
        "platform": "c16",
        "workload": "b40",
        "mode": "deterministic",
    }
    assert sweep.replicates == 3


def test_list_valued_parameters_are_factors_crossed_with_the_grid():
    spec = base_spec(
        schedulers={"a": "python a.py", "b": "python b.py"},
        workloads={"gen": {"generator": "burst", "count": [2, 4], "delay": 10}},
        modes={
            "deterministic": {},
            "lockstep": {"timeout-value": [5, 10, 20], "min-delay": 0},
        },
    )
    sweep = parse(spec)
    # 2 schedulers x 2 counts x (1 deterministic + 3 lockstep timeouts)
    assert len(sweep.points) == 2 * 2 * 4
    assert sweep.factor_columns == [
        "scheduler",
        "platform",
        "workload",
        "mode",
        "count",
        "timeout-value",
    ]
    det = [p for p in sweep.points if p.factors["mode"] == "deterministic"]
    assert all("timeout-value" not in p.factors for p in det)
    lock = [p for p in sweep.points if p.factors["mode"] == "lockstep"]
    assert sorted({p.factors["timeout-value"] for p in lock}) == [5, 10, 20]
    assert all(p.settings["mode"]["min-delay"] == 0 for p in lock)


def test_grid_restricts_levels_and_rows_add_points():
    spec = base_spec(
        schedulers={"a": "python a.py", "b": "python b.py", "c": "python c.py"},
        grid={"scheduler": ["a", "b"]},
        rows=[{"scheduler": "c"}, {"scheduler": "a"}],  # the second repeats a grid cell
    )
    sweep = parse(spec)
    assert [p.factors["scheduler"] for p in sweep.points] == ["a", "b", "c"]


def test_rows_alone_give_exactly_those_points():
    spec = base_spec(schedulers={"a": "python a.py", "b": "python b.py"}, rows=[{"scheduler": "b"}])
    assert [p.factors["scheduler"] for p in parse(spec).points] == ["b"]


def test_toml_and_yaml_files_load_the_same_sweep(tmp_path):
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(base_spec(replicates=2)))
    (tmp_path / "s.toml").write_text(
        f"""root = "{ROOT}"
replicates = 2
[schedulers]
tiny = "python tests/programs/tiny_scheduler.py"
[platforms]
c16 = "{PLATFORM}"
[workloads]
b40 = "{WORKLOAD}"
[modes.deterministic]
"""
    )
    a, b = load_sweep(tmp_path / "s.yaml"), load_sweep(tmp_path / "s.toml")
    assert [p.factors for p in a.points] == [p.factors for p in b.points]
    assert a.replicates == b.replicates == 2


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"replicates": 0}, "replicates", "integer >= 1"),
        ({"replicates": "three"}, "replicates", "expected an integer"),
        ({"timeout": -1}, "timeout", "positive number"),
        ({"schedulers": {}}, "schedulers", "non-empty mapping"),
        ({"schedulers": {"x": ""}}, "schedulers.x[0]", "command line"),
        ({"platforms": {"p": "nowhere.xml"}}, "platforms.p", "no such file"),
        ({"workloads": {"w": {"generator": "zipf"}}}, "workloads.w.generator", "burst"),
        ({"workloads": {"w": {"generator": "burst", "count": []}}}, "workloads.w.count", "empty"),
        (
            {"workloads": {"w": {"generator": "burst", "count": [1, 1]}}},
            "workloads.w.count",
            "repeated level",
        ),
        ({"workloads": {"w": {"generator": "burst", "output": "x"}}}, "workloads.w.output", ""),
        ({"modes": {"fast": {}}}, "modes.fast.mode", "deterministic, lockstep, realtime"),
        ({"modes": {"lockstep": {"timeout": {"a": 1}}}}, "modes.lockstep.timeout", "a value"),
        ({"grid": {"scheduler": ["nope"]}}, "grid.scheduler", "no scheduler named 'nope'"),
        ({"grid": {"seed": [1]}}, "grid.seed", "unknown factor"),
        ({"rows": [{"workload": "zz"}]}, "rows[0].workload", "no workload named 'zz'"),
        ({"rows": [{"colour": "red"}]}, "rows[0].colour", "unknown key"),
        ({"replicate_count": 3}, "replicate_count", "unknown field"),
        (
            {"modes": {"lockstep": {"replicate": [1, 2]}}},
            "modes.lockstep.replicate",
            "reserved",
        ),
        ({"simulate_args": ["--epoch", "0", "-o", "x"]}, "simulate_args[2]", "chosen by the sweep"),
        ({"modes": {"lockstep": {"output": "x"}}}, "modes.lockstep.output", "chosen by the sweep"),
        (
            {"workloads": {"w": {"generator": "script", "script": "no/such.py"}}},
            "workloads.w.script",
            "no such generator script",
        ),
        ({"workloads": {"w": {"generator": "script"}}}, "workloads.w.script", "no such"),
    ],
)
def test_bad_sweep_files_are_rejected_with_the_field_named(change, field, words):
    with pytest.raises(SpecError) as info:
        parse(base_spec(**change))
    message = str(info.value)
    assert f": {field}: " in message
    assert words in message


def test_a_factor_name_cannot_mean_two_things():
    spec = base_spec(
        workloads={"p": {"generator": "poisson", "count": 3, "rate": [0.1, 0.2], "mean_delay": 9}},
        modes={"realtime": {"rate": [1, 2]}},
    )
    with pytest.raises(SpecError, match=r"modes\.realtime\.rate: .*also a workload parameter"):
        parse(spec)


def test_cli_rejects_a_bad_file_with_exit_2_and_writes_nothing(tmp_path, subprocess_env):
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(base_spec(replicates=-2)))
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "sweep", str(spec), "-o", str(out)],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"{spec}: replicates: expected an integer >= 1" in proc.stderr
    assert not out.exists()


def test_cli_rejects_unparsable_yaml_naming_the_file(tmp_path, subprocess_env):
    spec = tmp_path / "broken.yaml"
    spec.write_text("schedulers: [unclosed\n")
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "sweep", str(spec), "-o", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"{spec}: not valid YAML" in proc.stderr


def test_dry_run_lists_every_run_and_generates_seeded_inputs_per_replicate(tmp_path):
    spec = base_spec(
        replicates=3,
        base_seed=10,
        workloads={
            "p": {"generator": "poisson", "count": 3, "rate": 0.1, "mean_delay": 20},
            "fixed": {"generator": "poisson", "count": 3, "rate": 0.1, "mean_delay": 20, "seed": 7},
        },
    )
    sweep = parse(spec, tmp_path)
    runs = plan_runs(sweep, tmp_path / "results")
    assert len(runs) == 6
    assert len({r.run_id for r in runs}) == 6
    assert [r.seed for r in runs] == [10, 11, 12, 10, 11, 12]
    inputs = sorted(p.name for p in (tmp_path / "results" / "inputs").iterdir())
    # one file per seed for the seeded workload, one for the fixed seed
    assert len(inputs) == 4
    again = plan_runs(parse(spec, tmp_path), tmp_path / "results")
    assert [r.run_id for r in again] == [r.run_id for r in runs]  # stable across invocations


def test_run_ids_follow_file_contents_not_paths(tmp_path):
    w1 = tmp_path / "w1.json"
    w1.write_text((ROOT / WORKLOAD).read_text())
    spec = base_spec(workloads={"w": str(w1)})
    first = plan_runs(parse(spec, tmp_path), tmp_path / "r")[0].run_id
    w2 = tmp_path / "copy.json"
    w2.write_text(w1.read_text())
    moved = plan_runs(parse(base_spec(workloads={"w": str(w2)}), tmp_path), tmp_path / "r")[0]
    assert moved.run_id == first
    w2.write_text(w1.read_text().replace('"walltime": 1000', '"walltime": 999', 1))
    edited = plan_runs(parse(base_spec(workloads={"w": str(w2)}), tmp_path), tmp_path / "r")[0]
    assert edited.run_id != first


def test_mode_parameters_become_simulate_flags_and_placeholders_take_the_seed(tmp_path):
    spec = base_spec(
        schedulers={"s": "python s.py --seed {seed}"},
        modes={"lockstep": {"timeout-value": [5], "min_delay": 2, "fast-forward": True}},
        simulate_args=["--stall-timeout", "3"],
        base_seed=40,
    )
    run = plan_runs(parse(spec, tmp_path), tmp_path / "r")[0]
    argv = run.simulate_argv
    assert argv[:2] == ["--scheduler", "python s.py --seed 40"]
    i = argv.index("--mode")
    assert argv[i : i + 7] == [
        "--mode",
        "lockstep",
        "--timeout-value",
        "5",
        "--min-delay",
        "2",
        "--fast-forward",
    ]
    assert "--stall-timeout" in argv and "--no-plots" in argv


def test_each_run_gets_its_seed_and_seeds_can_be_the_axis(tmp_path):
    """Replicate r runs `timewarp simulate --seed base_seed + r`; a `seeds` list names
    the seeds instead (one run per seed and point), and a sweep file may not pass --seed."""
    runs = plan_runs(parse(base_spec(replicates=2, base_seed=3), tmp_path), tmp_path / "r")
    for run, seed in zip(runs, (3, 4), strict=True):
        i = run.simulate_argv.index("--seed")
        assert (run.seed, run.simulate_argv[i + 1]) == (seed, str(seed))
    sweep = parse(base_spec(seeds=[7, 1, 100]), tmp_path)
    assert (sweep.replicates, sweep.seeds) == (3, [7, 1, 100])
    runs = plan_runs(sweep, tmp_path / "s")
    assert [(r.replicate, r.seed) for r in runs] == [(0, 7), (1, 1), (2, 100)]
    assert len({r.run_id for r in runs}) == 3
    for bad, where, message in (
        ({"seeds": [1, 2], "replicates": 2}, "seeds", "either seeds or replicates"),
        ({"seeds": []}, "seeds", "non-empty list"),
        ({"seeds": [1, "x"]}, "seeds[1]", "expected an integer"),
        ({"seeds": [1, 1]}, "seeds[1]", "already in the list"),
        ({"simulate_args": ["--seed", "3"]}, "simulate_args[0]", "chosen by the sweep"),
    ):
        with pytest.raises(SpecError) as err:
            parse(base_spec(**bad), tmp_path)
        assert where in str(err.value) and message in str(err.value)


levels = st.lists(st.integers(0, 50), min_size=1, max_size=4, unique=True)


@given(
    counts=levels,
    timeouts=levels,
    n_sched=st.integers(1, 3),
    replicates=st.integers(1, 3),
)
def test_expansion_is_the_full_factorial(counts, timeouts, n_sched, replicates):
    spec = base_spec(
        replicates=replicates,
        schedulers={f"s{i}": f"python s{i}.py" for i in range(n_sched)},
        workloads={"gen": {"generator": "burst", "count": counts, "delay": 1}},
        modes={"deterministic": {}, "lockstep": {"timeout-value": timeouts}},
    )
    sweep = parse(spec)
    assert len(sweep.points) == n_sched * len(counts) * (1 + len(timeouts))
    keys = {tuple(sorted(p.factors.items())) for p in sweep.points}
    assert len(keys) == len(sweep.points)  # no point twice
    assert math.prod([n_sched, len(counts), 1 + len(timeouts)]) == len(keys)


def test_scheduler_parameters_fill_placeholders_and_lists_are_factors(tmp_path):
    spec = base_spec(
        schedulers={
            "plain": "python -m sample_schedulers.default_like",
            "kse": {
                "command": [
                    "python -m sample_schedulers.default_like",
                    "python -m sample_schedulers.kse_rebalancer --algorithm {algorithm} "
                    "--interval {interval} --seed {seed} --imbalance-csv {run_dir}/imb.csv",
                ],
                "algorithm": ["greedy", "refine"],
                "interval": 60,
            },
        },
        base_seed=5,
    )
    sweep = parse(spec, tmp_path)
    assert [p.factors.get("algorithm", "") for p in sweep.points] == ["", "greedy", "refine"]
    runs = plan_runs(sweep, tmp_path / "r")
    commands = [a for a in runs[2].simulate_argv if "kse_rebalancer" in a]
    assert commands == [
        "python -m sample_schedulers.kse_rebalancer --algorithm refine --interval 60 --seed 5"
        f" --imbalance-csv {runs[2].directory.resolve()}/imb.csv"
    ]
    # the run's directory is where it goes, not what it is: moving RESULTS keeps the ids
    moved = plan_runs(sweep, tmp_path / "elsewhere")
    assert [r.run_id for r in moved] == [r.run_id for r in runs]


def test_a_placeholder_without_a_parameter_is_rejected():
    spec = base_spec(schedulers={"s": {"command": "python s.py --rate {rate}", "rte": 2}})
    with pytest.raises(SpecError, match=r"schedulers\.s\[0\]: \{rate\} names no parameter"):
        parse(spec)


GENERATOR_SCRIPT = """
import argparse, json
p = argparse.ArgumentParser()
p.add_argument("--count", type=int, required=True)
p.add_argument("--seed", type=int, required=True)
p.add_argument("-o", required=True)
a = p.parse_args()
if a.count < 1:
    raise SystemExit("count must be >= 1")
jobs = [{"id": str(i), "subtime": a.seed, "res": 1, "profile": "d"} for i in range(a.count)]
profiles = {"d": {"type": "delay", "delay": 5, "cpu": "1"}}
json.dump({"nb_res": 1, "jobs": jobs, "profiles": profiles}, open(a.o, "w"))
"""


def test_a_script_generator_gets_its_flags_and_each_replicates_seed(tmp_path):
    (tmp_path / "gen.py").write_text(GENERATOR_SCRIPT)
    spec = base_spec(
        root=str(tmp_path),
        replicates=2,
        base_seed=7,
        schedulers={"s": "python s.py"},
        platforms={"c16": str(ROOT / PLATFORM)},
        workloads={"g": {"generator": "script", "script": "gen.py", "count": [1, 3]}},
    )
    runs = plan_runs(parse(spec, tmp_path), tmp_path / "results")
    assert len(runs) == 4 and len({r.run_id for r in runs}) == 4
    for r in runs:
        workload = r.simulate_argv[r.simulate_argv.index("-w") + 1]
        jobs = __import__("json").loads(Path(workload).read_text())["jobs"]
        assert len(jobs) == r.point.factors["count"]
        assert {j["subtime"] for j in jobs} == {r.seed}  # the run's seed reached the script


def test_a_failing_script_generator_is_reported_with_its_message(tmp_path):
    (tmp_path / "gen.py").write_text(GENERATOR_SCRIPT)
    spec = base_spec(
        root=str(tmp_path),
        schedulers={"s": "python s.py"},
        platforms={"c16": str(ROOT / PLATFORM)},
        workloads={"g": {"generator": "script", "script": "gen.py", "count": 0}},
    )
    with pytest.raises(SpecError) as info:
        plan_runs(parse(spec, tmp_path), tmp_path / "results")
    assert "workloads.g: the generator failed" in str(info.value)
    assert "count must be >= 1" in str(info.value)
    assert not list((tmp_path / "results" / "inputs").glob("*.json"))


def test_a_relative_results_folder_is_the_callers_whatever_the_root(
    tmp_path, subprocess_env, monkeypatch
):
    """Issue 27 item 6: with ``root: DIR`` and a relative ``-o``, the generated inputs
    landed in ``DIR/res/inputs`` (the generator runs with its cwd at the root) and the
    sweep then failed; every path a run or generator is given must be the caller's."""
    root, here = tmp_path / "root", tmp_path / "here"
    root.mkdir()
    here.mkdir()
    spec = base_spec(
        root=str(root),
        platforms={"c16": str(ROOT / PLATFORM)},
        workloads={"p": {"generator": "poisson", "count": 3, "rate": 0.1, "mean_delay": 20}},
    )
    file = tmp_path / "sweep.yaml"
    file.write_text(yaml.safe_dump(spec))
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "sweep", str(file), "-o", "res", "--dry-run"],
        capture_output=True,
        text=True,
        env=subprocess_env,
        cwd=here,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert len(list((here / "res" / "inputs").glob("workload-p-*.json"))) == 1
    assert not (root / "res").exists()
    monkeypatch.chdir(here)
    runs = plan_runs(parse(spec, tmp_path), Path("res"))  # as the command plans, from here…
    for r in runs:  # …every path a run gets works from the root, where it runs
        argv = r.simulate_argv
        for flag in ("-w", "-o"):
            assert Path(argv[argv.index(flag) + 1]).is_absolute()
        assert r.directory.is_absolute()


LEVELS = list(range(400))  # 400 × 400 = 160,000 points: over the limit, cheap to refuse


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"replicates": 10**9}, "replicates: 1,000,000,000 is over the limit of 100,000 runs"),
        (
            {"workloads": {"p": {"generator": "burst", "count": LEVELS, "delay": LEVELS}}},
            "grid: 160,000 points × 1 replicates is over the limit of 100,000 runs per sweep",
        ),
        (
            {"replicates": 1_000, "workloads": {"p": {"generator": "burst", "count": LEVELS}}},
            "grid: 400 points × 1,000 replicates is over the limit of 100,000 runs per sweep",
        ),
        (
            {
                "workloads": {"p": {"generator": "burst", "count": LEVELS, "delay": LEVELS}},
                "rows": [{"workload": "p"}],
            },
            "rows[0]: more than 100,000 points × 1 replicates is over the limit",
        ),
    ],
    ids=["replicates", "grid", "grid-replicates", "rows"],
)
def test_a_sweep_past_the_run_limit_is_refused_before_it_is_expanded(change, message):
    """Issue 27 item 7: replicates: 1e9 or a 1000×1000 grid took 3 GB in --dry-run."""
    assert MAX_RUNS == 100_000  # the value docs/sweep.md and docs/security.md state
    with pytest.raises(SpecError) as info:
        parse(base_spec(**change))
    assert message in str(info.value)


def test_the_cli_refuses_a_billion_replicates_at_once(tmp_path, subprocess_env):
    spec = tmp_path / "big.yaml"
    spec.write_text(yaml.safe_dump(base_spec(replicates=10**9)))
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "sweep", str(spec), "-o", str(tmp_path / "r")]
        + ["--dry-run"],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"{spec}: replicates: 1,000,000,000 is over the limit" in proc.stderr


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bin.yaml", bytes(range(256)) * 4, "not a YAML text file (not UTF-8 at byte 128)"),
        ("deep.yaml", b"a: " + b"[" * 20_000 + b"]" * 20_000, "not valid YAML: nested too deeply"),
        ("deep.toml", b"a = " + b"[" * 20_000 + b"]" * 20_000, "not valid TOML: nested too deeply"),
    ],
    ids=["binary", "deep-yaml", "deep-toml"],
)
def test_an_unreadable_sweep_file_is_exit_2_not_a_traceback(
    tmp_path, subprocess_env, name, content, message
):
    """Issue 27 item 12: UnicodeDecodeError and RecursionError tracebacks."""
    spec = tmp_path / name
    spec.write_bytes(content)
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "sweep", str(spec), "-o", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        env=subprocess_env,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"timewarp sweep: {spec}: {message}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_sweep_file_that_is_not_a_regular_file_is_refused(tmp_path):
    import os

    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    for path, message in ((fifo, "not a file"), (Path("/dev/zero"), "not a file")):
        with pytest.raises(SpecError) as info:
            load_sweep(path)
        assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"replicate": 3}, "replicate", "unknown field (did you mean 'replicates'?)"),
        ({"base-seed": 3}, "base-seed", "(did you mean 'base_seed'?)"),
        ({"grid": {"schedulers": ["tiny"]}}, "grid.schedulers", "(did you mean 'scheduler'?)"),
        ({"grid": {"scheduler": ["tinny"]}}, "grid.scheduler", "(did you mean 'tiny'?)"),
        ({"rows": [{"workload": "b04"}]}, "rows[0].workload", "(did you mean 'b40'?)"),
        ({"rows": [{"shceduler": "tiny"}]}, "rows[0].shceduler", "(did you mean 'scheduler'?)"),
        ({"workloads": {"w": {"generator": "poison", "count": 1}}}, "workloads.w.generator",
         "(did you mean 'poisson'?)"),
        ({"workloads": {"w": {"generator": "poisson", "count": 2, "rate": 1,
                              "mean_dealy": 10}}},
         "workloads.w.mean_dealy", "timewarp workload poisson has no --mean-dealy "
         "(did you mean 'mean-delay'?)"),
        ({"platforms": {"p": {"generator": "platform", "node": 4}}}, "platforms.p.node",
         "(did you mean 'nodes'?)"),
    ],
)  # fmt: skip
def test_a_mistyped_key_gets_did_you_mean(change, field, words):
    with pytest.raises(SpecError) as info:
        parse(base_spec(**change))
    assert f": {field}: " in str(info.value) and words in str(info.value), str(info.value)


def test_every_generator_flag_is_accepted():
    spec = base_spec(workloads={
        "p": {"generator": "poisson", "count": 2, "rate": 1, "mean_delay": 10, "fixed-delay": True},
        "s": {"generator": "service", "pattern": "daily", "hpa-target": 60},
    })  # fmt: skip
    assert len(parse(spec).points) == 2
