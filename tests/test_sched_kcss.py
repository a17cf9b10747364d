"""kcss: TOPSIS against a hand-worked example, the six criteria, configuration, the CLI,
and the scheduling loop with typed objects."""

from __future__ import annotations

import csv
import functools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client

from sample_schedulers.common.loop import WatchScheduler
from sample_schedulers.common.model import NodeImage, NodeSummary, NodeView, PodSummary
from sample_schedulers.common.resources import Resources
from sample_schedulers.kcss.criteria import (
    CRITERIA,
    KcssConfig,
    build_config,
    image_size,
    node_criteria,
    normalize_image,
)
from sample_schedulers.kcss.decide import decide
from sample_schedulers.kcss.topsis import relative_closeness

GI = 1024**3
MI = 1024**2

# -- TOPSIS ------------------------------------------------------------------------------


def test_topsis_matches_a_worked_example():
    """Three nodes A, B, C; criteria c1 (benefit, w=0.5), c2 (benefit, w=0.25),
    c3 (cost, w=0.25).

    f = A (2, 6, 4), B (3, 2, 4), C (6, 3, 7)
    column norms: sqrt(4+9+36) = 7, sqrt(36+4+9) = 7, sqrt(16+16+49) = 9
    v = w * f / norm:
        A (1/7, 1.5/7, 1/9)   B (1.5/7, 0.5/7, 1/9)   C (3/7, 0.75/7, 1.75/9)
    A+ = (3/7, 1.5/7, 1/9)    A- = (1/7, 0.5/7, 1.75/9)
    A: S+ = 2/7                               S- = sqrt((1/7)^2 + (0.75/9)^2)
    B: S+ = sqrt(1.5^2 + 1^2) / 7             S- = sqrt((0.5/7)^2 + (0.75/9)^2)
    C: S+ = 0.75 * sqrt(1/49 + 1/81)          S- = sqrt(2^2 + 0.25^2) / 7
    RC = S- / (S+ + S-): A 0.3666, B 0.2988, C 0.6796 -> C first, then A, then B.
    """
    a_plus, a_minus = 2 / 7, math.sqrt((1 / 7) ** 2 + (0.75 / 9) ** 2)
    b_plus, b_minus = math.sqrt(1.5**2 + 1) / 7, math.sqrt((0.5 / 7) ** 2 + (0.75 / 9) ** 2)
    c_plus, c_minus = 0.75 * math.sqrt(1 / 49 + 1 / 81), math.sqrt(4 + 0.25**2) / 7
    expected = [
        a_minus / (a_plus + a_minus),
        b_minus / (b_plus + b_minus),
        c_minus / (c_plus + c_minus),
    ]
    got = relative_closeness(
        [[2, 6, 4], [3, 2, 4], [6, 3, 7]], [0.5, 0.25, 0.25], [True, True, False]
    )
    assert got == pytest.approx(expected, abs=1e-12)
    assert [round(x, 4) for x in got] == [0.3666, 0.2988, 0.6796]


def test_dominant_and_dominated_alternatives_score_one_and_zero():
    # c1 benefit [2, 3, 6] (norm 7), c2 cost [8, 4, 1] (norm 9), weights 0.5 each:
    # C is best on both (RC 1), A worst on both (RC 0); B in between:
    # S+ = 1.5 * sqrt(1/49 + 1/81), S- = sqrt((0.5/7)^2 + (2/9)^2)
    rc = relative_closeness([[2, 8], [3, 4], [6, 1]], [0.5, 0.5], [True, False])
    s_plus, s_minus = 1.5 * math.sqrt(1 / 49 + 1 / 81), math.sqrt((0.5 / 7) ** 2 + (2 / 9) ** 2)
    assert rc == pytest.approx([0.0, s_minus / (s_plus + s_minus), 1.0])


def test_identical_alternatives_and_zero_columns_are_defined():
    assert relative_closeness([[1, 0], [1, 0]], [0.5, 0.5], [True, True]) == [0.5, 0.5]
    assert relative_closeness([[5]], [1.0], [True]) == [0.5]
    assert relative_closeness([], [1.0], [True]) == []


def test_topsis_rejects_mismatched_shapes_and_negative_weights():
    with pytest.raises(ValueError, match="same length"):
        relative_closeness([[1, 2]], [1.0], [True])
    with pytest.raises(ValueError, match="non-negative"):
        relative_closeness([[1]], [-1.0], [True])


matrices = st.integers(1, 6).flatmap(
    lambda cols: st.tuples(
        st.lists(
            st.lists(st.floats(0, 1e6, allow_nan=False), min_size=cols, max_size=cols),
            min_size=1,
            max_size=8,
        ),
        st.lists(st.floats(0.01, 1), min_size=cols, max_size=cols),
        st.lists(st.booleans(), min_size=cols, max_size=cols),
    )
)


@given(matrices)
def test_closeness_is_in_unit_interval_and_scale_invariant(case):
    matrix, weights, benefit = case
    rc = relative_closeness(matrix, weights, benefit)
    assert all(0 <= x <= 1 for x in rc)
    scaled = [[x * 1000 for x in row] for row in matrix]  # e.g. cores -> millicores
    assert relative_closeness(scaled, weights, benefit) == pytest.approx(rc, abs=1e-9)


@given(matrices)
def test_an_alternative_that_dominates_all_others_ranks_first(case):
    matrix, weights, benefit = case
    best = [
        max(r[j] for r in matrix) if benefit[j] else min(r[j] for r in matrix)
        for j in range(len(weights))
    ]
    rc = relative_closeness([*matrix, best], weights, benefit)
    assert rc[-1] == max(rc)


# -- criteria ------------------------------------------------------------------------------


def node(name, cpu=4000, mem=8 * GI, annotations=None, labels=None, images=(), **extra):
    alloc = {"cpu": cpu, "memory": mem, **extra}
    return NodeSummary(
        name,
        Resources(alloc),
        annotations=annotations or {},
        labels=labels or {},
        images=images,
    )


def pod(name="new", cpu=1000, mem=GI, images=("app:1",), annotations=None, node_name=None):
    r = Resources({"cpu": cpu, "memory": mem})
    return PodSummary(
        "default",
        name,
        node_name=node_name,
        phase="Running" if node_name else "Pending",
        requests=r,
        nonzero_requests=r,
        images=images,
        containers=len(images),
        annotations=annotations or {},
    )


def test_image_names_are_normalised():
    assert normalize_image("busybox") == "busybox:latest"
    assert normalize_image("docker.io/library/busybox:1.36") == "busybox:1.36"
    assert normalize_image("registry:5000/team/app") == "registry:5000/team/app:latest"
    assert normalize_image("app@sha256:abc") == "app@sha256:abc"


def test_criteria_values_of_a_node_by_hand():
    # n: 4 cpu / 8Gi; a running pod uses 1 cpu / 2Gi with two containers; disk 100Gi free
    # minus the running pod's 10Gi of ephemeral storage; power 100 W idle, 300 W at full
    # cpu. The new pod (1 cpu) pulls a 500Mi image over 125 MB/s.
    n = node(
        "n",
        annotations={
            "timewarp.io/disk-free": "100Gi",
            "timewarp.io/power-idle-watts": "100",
            "timewarp.io/power-max-watts": "300",
            "timewarp.io/bandwidth": "125M",
        },
    )
    running = PodSummary(
        "default",
        "old",
        node_name="n",
        phase="Running",
        requests=Resources({"cpu": 1000, "memory": 2 * GI, "ephemeral-storage": 10 * GI}),
        containers=2,
    )
    new = pod(annotations={"timewarp.io/image-size": "500Mi"})
    config = KcssConfig()
    problems = []
    values = node_criteria(new, NodeView(n, (running,)), 500 * MI, config, problems)
    assert dict(zip(CRITERIA, values, strict=True)) == {
        "image": 500 * MI / 125e6,  # 4.194304 s
        "cpu": 3000.0,
        "memory": 6.0 * GI,
        "disk": 90.0 * GI,
        "power": 100 + 200 * (2000 / 4000),  # 200 W once the new pod runs
        "containers": 2.0,
    }
    assert problems == []


def test_image_already_on_the_node_costs_nothing_to_pull():
    with_image = node("a", images=(NodeImage(("docker.io/library/app:1",), 300 * MI),))
    listed = node("b", annotations={"timewarp.io/images": "other:2, app:1"})
    bare = node("c")
    views = [NodeView(with_image), NodeView(listed), NodeView(bare)]
    new = pod()
    config = KcssConfig()
    size = image_size(new, views, config)
    assert size == 300 * MI  # learnt from node a's status.images
    transfer = [node_criteria(new, v, size, config, [])[0] for v in views]
    assert transfer == [0.0, 0.0, 300 * MI / 125e6]


def test_bad_annotation_falls_back_to_default_and_is_reported():
    views = [
        NodeView(node("a", annotations={"timewarp.io/power-watts": "lots"})),
        NodeView(node("b")),
    ]
    decision = decide(pod(), views, KcssConfig())
    assert decision.node is not None
    assert "timewarp.io/power-watts='lots' is not valid" in decision.detail


# -- decisions -----------------------------------------------------------------------------


def test_prefers_the_node_that_already_has_the_image():
    views = [
        NodeView(node("n1")),
        NodeView(node("n2", images=(NodeImage(("app:1",), 800 * MI),))),
    ]
    assert decide(pod(), views, KcssConfig()).node == "n2"


def test_power_is_a_cost_unless_configured_otherwise():
    views = [
        NodeView(node("hungry", annotations={"timewarp.io/power-watts": "250"})),
        NodeView(node("frugal", annotations={"timewarp.io/power-watts": "90"})),
    ]
    assert decide(pod(), views, KcssConfig()).node == "frugal"
    flipped = build_config(direction_args=["power=benefit"])
    assert decide(pod(), views, flipped).node == "hungry"


def test_weights_decide_between_conflicting_criteria():
    # "big" has more free cpu and memory; "warm" already has the image
    big = NodeView(node("big", cpu=16000, mem=32 * GI))
    warm = NodeView(node("warm", images=(NodeImage(("app:1",), 2 * GI),)))
    views = [big, warm]
    image_heavy = build_config(weight_args=["image=10"])
    resource_heavy = build_config(weight_args=["image=0.1", "cpu=5", "memory=5"])
    assert decide(pod(), views, image_heavy).node == "warm"
    assert decide(pod(), views, resource_heavy).node == "big"


def test_fewer_running_containers_wins_when_all_else_is_equal():
    busy = NodeView(
        node("busy", cpu=8000), (pod("x", cpu=2000, node_name="busy", images=("a", "b", "c")),)
    )
    calm = NodeView(
        node("calm", cpu=6000), (pod("y", cpu=0, mem=GI, node_name="calm", images=("a",)),)
    )
    # same free cpu (6000) and memory (7Gi) on both; busy runs 3 containers, calm 1
    only_containers = build_config(
        weight_args=[f"{c}=0" for c in CRITERIA if c != "containers"] + ["containers=1"]
    )
    assert decide(pod(), [busy, calm], only_containers).node == "calm"


def test_infeasible_nodes_are_never_chosen():
    views = [NodeView(node("tiny", cpu=500)), NodeView(node("ok", cpu=2000))]
    assert decide(pod(cpu=1000), views, KcssConfig()).node == "ok"
    nothing = decide(pod(cpu=9000), views, KcssConfig())
    assert nothing.node is None and "2 Insufficient cpu" in nothing.reason


# -- configuration -------------------------------------------------------------------------


def test_config_file_and_flags_combine_and_normalise(tmp_path):
    path = tmp_path / "kcss.yaml"
    path.write_text(
        "weights: {image: 4, cpu: 2, memory: 2, disk: 0, power: 1, containers: 1}\n"
        "directions: {containers: benefit}\n"
        "defaults: {image_size: 200Mi, bandwidth: 1G, power_watts: 120}\n"
        "keys: {power_watts: example.com/watts}\n"
    )
    config = build_config(str(path), weight_args=["power=2"])
    assert config.weights == pytest.approx([4 / 11, 2 / 11, 2 / 11, 0, 2 / 11, 1 / 11])
    assert config.benefit == (False, True, True, True, False, True)
    assert config.default_image_size == 200 * MI
    assert config.default_bandwidth == 10**9
    assert config.default_power_watts == 120
    assert config.keys["power_watts"] == "example.com/watts"


@pytest.mark.parametrize(
    ("text", "flags", "message"),
    [
        ("weights: {speed: 1}\n", {}, "unknown criterion 'speed'"),
        ("weights: {cpu: -1}\n", {}, "'cpu' must be >= 0"),
        ("weights: {cpu: fast}\n", {}, "'cpu' is not a number"),
        ("directions: {power: up}\n", {}, "'power' must be benefit or cost"),
        ("defaults: {bandwidth: quick}\n", {}, "defaults"),
        ("colour: red\n", {}, "unknown section(s) colour"),
        ("- a list\n", {}, "expected a mapping"),
        ("weights: [1, 2]\n", {}, "'weights' must be a mapping"),
        ("", {"weight_args": ["cpu"]}, "--weight 'cpu': expected NAME=VALUE"),
        ("", {"weight_args": [f"{c}=0" for c in CRITERIA]}, "at least one weight"),
    ],
)
def test_bad_config_is_reported_with_file_and_field(tmp_path, text, flags, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        build_config(str(path), **flags)
    assert message in str(info.value)
    if "weight_args" not in flags:
        assert str(path) in str(info.value)


def test_missing_config_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="nope.yaml: cannot read"):
        build_config(str(tmp_path / "nope.yaml"))


def test_cli_rejects_bad_weights_with_usage_error(subprocess_env):
    proc = subprocess.run(
        [sys.executable, "-m", "sample_schedulers.kcss", "--weight", "speed=3"],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown criterion 'speed'" in proc.stderr


# -- the loop with typed objects -------------------------------------------------------------


def typed_node(name, watts, cpu="4"):
    return client.V1Node(
        metadata=client.V1ObjectMeta(
            name=name,
            resource_version="1",
            labels={"kubernetes.io/hostname": name},
            annotations={"timewarp.io/power-watts": str(watts)},
        ),
        status=client.V1NodeStatus(allocatable={"cpu": cpu, "memory": "8Gi"}),
    )


def typed_pod(name, cpu="1"):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace="default", resource_version="1"),
        spec=client.V1PodSpec(
            scheduler_name="kcss",
            containers=[
                client.V1Container(
                    name="c",
                    image="app:1",
                    resources=client.V1ResourceRequirements(requests={"cpu": cpu}),
                )
            ],
        ),
        status=client.V1PodStatus(phase="Pending"),
    )


def test_kcss_loop_fills_the_frugal_node_while_it_stays_closest():
    bindings = []
    decide_fn = functools.partial(decide, config=build_config(weight_args=["power=3"]))
    s = WatchScheduler(
        None,
        decide_fn,
        scheduler_name="kcss",
        binder=lambda ns, name, node: bindings.append((name, node)),
    )
    s.replace_nodes([typed_node("frugal", 80), typed_node("hungry", 240)])
    s.replace_pods([typed_pod(f"p{i}") for i in range(6)])
    while s.schedule_one(timeout=0):
        pass
    placed = [node for _, node in bindings]
    assert len(placed) == 6
    # power dominates: the frugal node takes pods until it is full (4 cpu), then hungry
    assert placed == ["frugal"] * 4 + ["hungry"] * 2


# -- end to end: `timewarp simulate` in deterministic mode ---------------------------------------

ROOT = Path(__file__).resolve().parent.parent

POWER_PLATFORM = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="AS0" routing="Full">
    <host id="master" speed="1Gf"><prop id="role" value="master"/></host>
    {hosts}
  </zone>
</platform>
"""
HOST = (
    '<host id="{name}" speed="1Gf"><prop id="core" value="2"/>'
    '<prop id="memory" value="4Gi"/><prop id="power_watts" value="{watts}"/></host>'
)


def run_simulate(tmp_path, env, scheduler):
    # host props become node annotations timewarp.io/<prop> (power_watts -> power-watts);
    # Batsim resource ids follow the sorted host names: frugal-1=0, frugal-2=1, hungry-*=2,3
    hosts = [("frugal-1", 80), ("frugal-2", 90), ("hungry-1", 250), ("hungry-2", 260)]
    tmp_path.mkdir(parents=True)
    platform = tmp_path / "power4.xml"
    platform.write_text(
        POWER_PLATFORM.format(hosts="\n    ".join(HOST.format(name=n, watts=w) for n, w in hosts))
    )
    workload = tmp_path / "four.json"
    profile = {"type": "delay", "delay": 100, "cpu": "1", "memory": "500Mi", "scheduler": "default"}
    jobs = [
        {"id": str(i), "subtime": 0, "res": 1, "walltime": 1000, "profile": "p"}
        for i in range(1, 5)
    ]
    workload.write_text(json.dumps({"nb_res": 4, "jobs": jobs, "profiles": {"p": profile}}))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots", "--check-determinism"]
        + ["--scheduler", scheduler, "-p", str(platform), "-w", str(workload), "-o", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "out_jobs.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_simulated_kcss_packs_low_power_nodes_where_default_like_spreads(tmp_path, subprocess_env):
    kcss = run_simulate(
        tmp_path / "kcss",
        subprocess_env,
        "python -m sample_schedulers.kcss --scheduler-name default --weight power=3",
    )
    spread = run_simulate(
        tmp_path / "default",
        subprocess_env,
        "python -m sample_schedulers.default_like --scheduler-name default",
    )
    for rows in (kcss, spread):
        assert len(rows) == 4
        assert all(r["final_state"] == "COMPLETED_SUCCESSFULLY" for r in rows)
        assert all(float(r["starting_time"]) == 0.0 for r in rows)
    # the four 1-cpu pods fill the two 2-cpu low-power nodes ...
    assert sorted(r["allocated_resources"] for r in kcss) == ["0", "0", "1", "1"]
    # ... where kube-scheduler's LeastAllocated puts one on each node
    assert sorted(r["allocated_resources"] for r in spread) == ["0", "1", "2", "3"]


def test_simgrid_wattage_per_state_gives_the_linear_power_model():
    # SimGrid's host property, as the broker publishes it: first state idle:epsilon:full
    n = node("n", annotations={"timewarp.io/wattage-per-state": "100:120:300, 90:95:200"})
    values = node_criteria(pod(cpu=1000), NodeView(n), 0, KcssConfig(), [])
    assert values[CRITERIA.index("power")] == 100 + (300 - 100) * 1000 / 4000
    bad = node("b", annotations={"timewarp.io/wattage-per-state": "lots"})
    problems = []
    node_criteria(pod(), NodeView(bad), 0, KcssConfig(), problems)
    assert problems and "wattage-per-state='lots' is not valid" in problems[0]
