"""`timewarp workload`: SWF import reproducing Batkube's conversion, seeded generators,
platform generators, bad input."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from simulator import generators
from simulator.platform import load_platform
from simulator.swf import SwfError, read_swf
from simulator.testing import shared_data_dir
from simulator.workload import base_duration, load_workload


def _tool(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "timewarp", "workload", *map(str, args)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _summary(workload):
    return [
        (j["id"], j["subtime"], workload["profiles"][j["profile"]]["delay"],
         workload["profiles"][j["profile"]].get("cpu"))
        for j in workload["jobs"]
    ]  # fmt: skip


def test_from_swf_reproduces_batkubes_kit_workload(tmp_path, subprocess_env):
    data = shared_data_dir()
    if data is None:
        pytest.skip("shared/data is not beside this checkout")
    out = tmp_path / "kit.json"
    proc = _tool(subprocess_env, "from-swf", data / "swf/KIT-10-80.swf", "-o", out,
                 "--norm", 6, "--max-procs", 1024, "--cpu-cap", 5.9, "--trim", 3600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ours = json.loads(out.read_text())
    batkube = json.loads((data / "batkube/workloads/KIT_10h_80.json").read_text())
    assert _summary(ours) == _summary(batkube)


def test_from_swf_window_and_header_maxprocs(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text(
        "; MaxProcs: 8\n"
        "1 100 0 50 4 -1 -1 4 60 -1 1 1 1 -1 1 1 -1 -1\n"
        "2 150 0 0 2 -1 -1 2 60 -1 1 1 1 -1 1 1 -1 -1\n"  # run time 0: skipped
        "3 200 0 30 1 -1 -1 1 60 -1 1 1 1 -1 1 1 -1 -1\n"
        "4 900 0 30 8 -1 -1 8 60 -1 1 1 1 -1 1 1 -1 -1\n"
    )
    from simulator.swf import convert

    jobs, header = read_swf(trace)
    workload = convert(jobs, header, source=str(trace), norm=2, window=(0, 500))
    assert _summary(workload) == [("1", 0, 50, 1.0), ("3", 100, 30, 0.25)]
    procs = convert(jobs, header, source=str(trace), mode="procs")
    assert [j["res"] for j in procs["jobs"]] == [4, 1, 8] and procs["nb_res"] == 8


def test_malformed_swf_names_the_line(tmp_path, subprocess_env):
    trace = tmp_path / "bad.swf"
    trace.write_text("; MaxProcs: 8\n1 2 3\n")
    with pytest.raises(SwfError, match=r"bad.swf:2: expected 18 fields, found 3"):
        read_swf(trace)
    proc = _tool(subprocess_env, "from-swf", trace, "-o", tmp_path / "o.json")
    assert proc.returncode == 2 and "bad.swf:2" in proc.stderr
    assert not (tmp_path / "o.json").exists()


def test_generators_are_seeded_and_load_in_the_simulator(tmp_path, subprocess_env):
    outputs = []
    for run in ("a", "b"):
        out = tmp_path / f"{run}.json"
        proc = _tool(subprocess_env, "poisson", "-n", 50, "--rate", 0.2, "--mean-delay", 60,
                     "--seed", 7, "-o", out)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    workload = load_workload(tmp_path / "a.json", "w0", 1)
    subtimes = [j.subtime for j in workload.jobs]
    assert subtimes == sorted(subtimes) and len(subtimes) == 50
    # mean inter-arrival of a rate-0.2 Poisson process is 5 s
    assert 2.5 < subtimes[-1] / 49 < 10
    other = generators.poisson(50, 0.2, 60, seed=8)
    assert other != json.loads(outputs[0])


def test_burst_and_spaced_have_batkubes_shape():
    burst = generators.burst(40, 170)
    assert {j["subtime"] for j in burst["jobs"]} == {0}
    # the pods' schedulerName: a real API server's default, which the sample schedulers
    # serve (issue 15 item 1: generators and broker used to disagree, default/default-scheduler)
    assert burst["profiles"]["delay"] == {
        "type": "delay", "delay": 170, "cpu": "1", "scheduler": "default-scheduler"
    }  # fmt: skip
    spaced = generators.spaced(3, 90, 10)
    assert [j["subtime"] for j in spaced["jobs"]] == [0, 10, 20]


def test_mixed_workload_on_heterogeneous_platform_uses_class_durations(tmp_path):
    (tmp_path / "h.xml").write_text(generators.heterogeneous_platform(2, 1))
    platform = load_platform(tmp_path / "h.xml")
    assert [h.node_class for h in platform.compute] == ["cpu", "cpu", "gpu"]
    assert platform.compute[2].properties["gpu"] == "1"
    mixed = generators.mixed(20, 0.1, seed=1, gpu_fraction=0.5)
    kinds = {j["profile"] for j in mixed["jobs"]}
    assert kinds == {"gpu_image", "cpu_image"}
    profiles = mixed["profiles"]
    assert base_duration("gpu_image", profiles, [1e9], ["gpu"]) == 100
    assert base_duration("gpu_image", profiles, [1e9], ["cpu"]) == 600


def test_platform_cli_writes_a_loadable_platform(tmp_path, subprocess_env):
    out = tmp_path / "c.xml"
    proc = _tool(subprocess_env, "platform", "-n", 12, "--cores", 4, "-o", out)
    assert proc.returncode == 0, proc.stderr
    platform = load_platform(out)
    assert len(platform.compute) == 12 and platform.compute[11].name == "node11"
    assert platform.compute[0].properties == {"core": "4", "memory": "4Gi"}
    proc = _tool(subprocess_env, "platform", "-o", tmp_path / "none.xml")
    assert proc.returncode == 2 and "give -n/--nodes" in proc.stderr


def test_bundled_example_inputs_load():
    from simulator.testing import ROOT

    platform = load_platform(ROOT / "examples/inputs/cluster16.xml")
    workload = load_workload(ROOT / "examples/inputs/burst_40_delay170.json", "w0", 16)
    assert len(platform.compute) == 16 and len(workload.jobs) == 40


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_outputs_get_the_mode_the_umask_gives(tmp_path, umask):
    """Inputs are meant to be shared: `-o FILE` is created as `open(FILE, "w")` would
    (0666 less the umask), not 0600 as a temporary file is (issue 15 item 12)."""
    from simulator import workload_cli

    previous = os.umask(umask)
    try:
        for argv in (["burst", "-n", "2", "--delay", "5"], ["platform", "-n", "2"]):
            out = tmp_path / f"{argv[0]}-{umask:o}.out"
            assert workload_cli_main(workload_cli, [*argv, "-o", str(out)]) == 0
            assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
    finally:
        os.umask(previous)


def workload_cli_main(module, argv):
    import argparse

    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return module.run(parser.parse_args(argv))


def test_the_bundled_example_is_made_by_the_documented_commands(tmp_path):
    """docs/simulator.md: examples/inputs/ is `burst -n 40 --delay 170 --scheduler default`
    (Batkube's name) and `platform -n 16 --cores 1`, byte for byte."""
    from simulator import workload_cli

    examples = Path(__file__).resolve().parent.parent / "examples" / "inputs"
    for argv, name in (
        (
            ["burst", "-n", "40", "--delay", "170", "--scheduler", "default"],
            "burst_40_delay170.json",
        ),
        (["platform", "-n", "16", "--cores", "1"], "cluster16.xml"),
    ):
        out = tmp_path / name
        assert workload_cli_main(workload_cli, [*argv, "-o", str(out)]) == 0
        assert out.read_bytes() == (examples / name).read_bytes()


def test_platform_flags_label_taint_and_cordon_nodes(tmp_path, subprocess_env):
    out = tmp_path / "shaped.xml"
    proc = _tool(subprocess_env, "platform", "-n", 4, "--cores", 2, "-o", out,
                 "--label", "env=prod,tier=web", "--label", "env=staging@2-3",
                 "--taint", "dedicated=gpu:NoSchedule@3", "--unschedulable", 1)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    props = [h.properties for h in load_platform(out).compute]
    assert [p["labels"] for p in props] == ["env=prod,tier=web"] * 2 + ["env=staging,tier=web"] * 2
    assert [p.get("taints") for p in props] == [None, None, None, "dedicated=gpu:NoSchedule"]
    assert [p.get("unschedulable") for p in props] == [None, None, None, "true"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--label", "bad key=1"], "--label (host node0): labels: 'bad key=1': key 'bad key'"),
        (["--label", "env"], "--label (host node0): labels: 'env': expected key=value"),
        (["--taint", "a=b:Nope@1"], "--taint (host node1): taints: 'a=b:Nope': unsupported"),
        (["--label", "env=a@4"], "--label 'env=a@4': nodes 4 are not within 0-3"),
        (["--unschedulable", "5"], "--unschedulable 5: the platform has 4 nodes"),
    ],
)
def test_bad_platform_flags_exit_2_naming_the_flag(tmp_path, subprocess_env, flags, message):
    out = tmp_path / "x.xml"
    proc = _tool(subprocess_env, "platform", "-n", 4, "-o", out, *flags)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not out.exists()


def test_an_output_that_cannot_be_written_is_a_usage_error(tmp_path, subprocess_env):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    proc = _tool(subprocess_env, "burst", "-n", 2, "--delay", 3, "-o", a_file / "w.json")
    assert proc.returncode == 2, proc.stderr
    assert "cannot write" in proc.stderr and "(File exists)" in proc.stderr
    assert "Traceback" not in proc.stderr
