"""default_like: kube-scheduler's LeastAllocated + BalancedAllocation, and its command line."""

from __future__ import annotations

import ast
import csv
import heapq
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simrun import run_simulate

from sample_schedulers.common.cluster import ClusterCache, NodeViews
from sample_schedulers.common.feasibility import unfit_reason
from sample_schedulers.common.model import NodeSummary, NodeView, PodSummary, Taint
from sample_schedulers.common.queue import natural_key
from sample_schedulers.common.resources import Resources
from sample_schedulers.default_like.scoring import (
    SampledDecide,
    balanced_allocation,
    choose,
    decide,
    least_allocated,
    natural_order,
    nodes_to_find,
    score,
)

GI = 1024**3
ROOT = Path(__file__).resolve().parent.parent


def pod(name="new", cpu=1000, mem=2 * GI, node=None, phase="Pending", nonzero=None):
    r = Resources({"cpu": cpu, "memory": mem})
    return PodSummary(
        "default",
        name,
        node_name=node,
        phase=phase,
        requests=r,
        nonzero_requests=nonzero or r,
    )


def node(name, cpu=4000, mem=8 * GI, **kw):
    return NodeSummary(name, Resources({"cpu": cpu, "memory": mem}), **kw)


def test_scores_match_a_hand_computation():
    # A: 4 cpu / 8Gi with 1 cpu / 2Gi running; the new pod asks 1 cpu / 2Gi.
    #   LeastAllocated: cpu (4000-2000)*100//4000 = 50, mem (8-4)*100//8 = 50 -> 100//2 = 50
    #   Balanced: fractions 0.5 and 0.5 -> std 0 -> 100.                     total 150
    # B: 2 cpu / 8Gi, empty.
    #   LeastAllocated: cpu (2000-1000)*100//2000 = 50, mem (8-2)*100//8 = 75 -> 125//2 = 62
    #   Balanced: |0.5 - 0.25| / 2 = 0.125 -> int(87.5) = 87.                 total 149
    a = NodeView(node("a"), (pod("old", node="a", phase="Running"),))
    b = NodeView(node("b", cpu=2000))
    new = pod()
    assert (least_allocated(new, a), balanced_allocation(new, a), score(new, a)) == (50, 100, 150)
    assert (least_allocated(new, b), balanced_allocation(new, b), score(new, b)) == (62, 87, 149)
    decision = decide(new, [b, a])
    assert decision.node == "a"
    assert "a=150" in decision.detail and "b=149" in decision.detail


@given(
    st.sampled_from([0, 1000, 4000]),
    st.sampled_from([0, GI, 8 * GI]),
    st.integers(0, 6000),
    st.integers(0, 10 * GI),
    st.integers(0, 3000),
    st.integers(0, 4 * GI),
)
def test_balanced_allocation_is_the_spelled_out_formula(
    cap_cpu, cap_mem, used_cpu, used_mem, cpu, mem
):
    """int((1 - std) * 100) of the capped fractions of the resources the node publishes."""
    view = NodeView(
        node("n", cpu=cap_cpu, mem=cap_mem),
        (pod("r", used_cpu, used_mem, node="n", phase="Running"),),
    )
    fractions = [
        min(requested / capacity, 1.0)
        for capacity, requested in ((cap_cpu, used_cpu + cpu), (cap_mem, used_mem + mem))
        if capacity
    ]
    std = abs(fractions[0] - fractions[1]) / 2 if len(fractions) == 2 else 0.0
    assert balanced_allocation(pod(cpu=cpu, mem=mem), view) == int((1 - std) * 100)


def test_least_allocated_counts_default_requests_but_balanced_does_not():
    # a pod with no requests: scoring charges 100m / 200Mi for LeastAllocated only
    empty = pod(cpu=0, mem=0, nonzero=Resources({"cpu": 100, "memory": 200 * 1024**2}))
    n = NodeView(node("n", cpu=1000, mem=2000 * 1024**2))
    # cpu (1000-100)*100//1000 = 90; mem (2000-200)*100//2000 = 90
    assert least_allocated(empty, n) == 90
    assert balanced_allocation(empty, n) == 100


def test_overcommitted_resource_scores_zero_and_fraction_caps_at_one():
    over = NodeView(node("n", cpu=1000), (pod("x", cpu=1500, node="n", phase="Running"),))
    new = pod(cpu=0, mem=4 * GI)
    # cpu requested 1500 > 1000 -> 0; memory (2Gi running + 4Gi new) of 8Gi:
    # (8-6)*100//8 = 25 -> (0 + 25)//2 = 12
    assert least_allocated(new, over) == 12
    # fractions: cpu min(1.5, 1) = 1, memory 0.75 -> std 0.125 -> 87
    assert balanced_allocation(new, over) == 87


def test_ties_go_to_the_smallest_node_name_in_natural_order():
    views = [NodeView(node(n)) for n in ["node-10", "node-2", "node-33"]]
    assert decide(pod(), views).node == "node-2"


def test_infeasible_everywhere_gives_kube_scheduler_style_reason():
    views = [NodeView(node("a", cpu=500)), NodeView(node("b", taints=(Taint("t", "NoSchedule"),)))]
    decision = decide(pod(), views)
    assert decision.node is None
    assert decision.reason == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {t}."
    )


def test_spreads_a_burst_across_identical_nodes():
    views = {n: NodeView(node(n)) for n in ["n1", "n2", "n3"]}
    placed = []
    for i in range(6):
        new = pod(f"p{i}", cpu=1000, mem=GI)
        target = decide(new, list(views.values())).node
        placed.append(target)
        v = views[target]
        views[target] = NodeView(v.node, v.pods + (pod(f"p{i}", 1000, GI, node=target),))
    assert placed == ["n1", "n2", "n3", "n1", "n2", "n3"]


@given(
    st.lists(
        st.tuples(st.integers(500, 8000), st.integers(1, 16), st.integers(0, 6000)),
        min_size=1,
        max_size=8,
    ),
    st.integers(100, 4000),
    st.randoms(use_true_random=False),
)
def test_decision_does_not_depend_on_node_order_and_always_fits(specs, want_cpu, rnd):
    views = [
        NodeView(node(f"n{i}", cpu=c, mem=m * GI), (pod(f"r{i}", used, GI, node=f"n{i}"),))
        for i, (c, m, used) in enumerate(specs)
    ]
    new = pod(cpu=want_cpu, mem=GI)
    first = decide(new, views)
    shuffled = list(views)
    rnd.shuffle(shuffled)
    assert decide(new, shuffled) == first
    if first.node is not None:
        chosen = next(v for v in views if v.name == first.node)
        assert chosen.requested.cpu_millis + want_cpu <= chosen.node.allocatable.cpu_millis


# -- the command line and the no-timewarp rule ---------------------------------------------


def run_cli(subprocess_env, *args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "sample_schedulers.default_like", *args],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
        **kw,
    )


def test_help_lists_the_scheduler_name_option(subprocess_env):
    proc = run_cli(subprocess_env, "--help")
    assert proc.returncode == 0
    assert "--scheduler-name" in proc.stdout


def test_bad_backoff_is_a_usage_error(subprocess_env):
    proc = run_cli(subprocess_env, "--initial-backoff", "5", "--max-backoff", "2")
    assert proc.returncode == 2
    assert "--max-backoff" in proc.stderr


def test_without_a_cluster_it_says_so(subprocess_env, tmp_path):
    env = dict(subprocess_env, KUBECONFIG=str(tmp_path / "nope"), HOME=str(tmp_path))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    proc = run_cli(env)
    assert proc.returncode == 1
    assert "cannot reach a cluster" in proc.stderr


def test_sample_schedulers_never_import_timewarp():
    offenders = []
    for folder in ("common", "default_like", "kcss"):
        for path in sorted((ROOT / "sample_schedulers" / folder).glob("*.py")):
            for n in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(n, ast.Import):
                    names = [a.name for a in n.names]
                elif isinstance(n, ast.ImportFrom) and n.module:
                    names = [n.module]
                offenders += [f"{path.name}: {m}" for m in names if m.split(".")[0] == "timewarp"]
    assert offenders == []


def test_random_module_is_not_used_for_decisions():
    # determinism: no randomness anywhere in the decision path
    for folder in ("common", "default_like", "kcss"):
        for path in (ROOT / "sample_schedulers" / folder).glob("*.py"):
            assert "import random" not in path.read_text(), path


# -- kube-scheduler's percentageOfNodesToScore (on by default) ---------------------------------------


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        (0, 50, 50),  # small clusters: every node
        (0, 128, 100),  # adaptive 49 % = 62, but never fewer than 100
        (0, 1000, 420),  # adaptive 50 - 8 = 42 %
        (0, 10000, 500),  # adaptive floor 5 %
        (0, 99, 99),  # below minFeasibleNodesToFind: every node
        (0, 100, 100),  # 50 % = 50, raised to 100
        (0, 5000, 500),  # 50 - 40 = 10 %
        (0, 6000, 300),  # 50 - 48 = 2 %, raised to 5 %
        (1, 20000, 200),  # an explicit percentage is not raised to 5 %
        (30, 1000, 300),
        (100, 5000, 5000),
    ],
)
def test_nodes_to_find_follows_kube_scheduler(percentage, nodes, expected):
    assert nodes_to_find(percentage, nodes) == expected


def test_sampled_search_stops_early_and_continues_round_robin():
    views = [NodeView(node(f"n{i:03d}")) for i in range(200)]
    sampled = SampledDecide(50)
    first = sampled(pod("a"), views)
    assert first.node == "n000" and sampled.next_start == 100
    second = sampled(pod("b"), views)
    assert second.node == "n100" and sampled.next_start == 0


def test_sampled_search_at_100_percent_equals_the_full_decision():
    views = [
        NodeView(node(f"n{i}", cpu=1000 * (i % 7 + 1)), (pod(f"r{i}", 500, GI, node=f"n{i}"),))
        for i in range(150)
    ]
    sampled = SampledDecide(100)
    for cpu in (100, 900, 2500, 6500, 9000):
        assert sampled(pod(cpu=cpu), views) == decide(pod(cpu=cpu), views)


def test_sampled_search_reports_why_nothing_fits():
    views = [NodeView(node(f"n{i:03d}", cpu=500)) for i in range(120)]
    decision = SampledDecide(0)(pod(cpu=1000), views)
    assert decision.node is None
    assert decision.reason == "0/120 nodes are available: 120 Insufficient cpu."


def _reference_sampled(pod_, views, want, start):
    """The search spelled out: rotate to ``start``, keep the first ``want`` feasible nodes,
    best score wins (ties: smallest name); the next start follows the last node examined."""
    from sample_schedulers.common.feasibility import unfit_reason

    n = len(views)
    found, examined = [], n
    for k in range(n):
        view = views[(start + k) % n]
        if unfit_reason(pod_, view) is None:
            found.append(view)
            if len(found) == want:
                examined = k + 1
                break
    best = min(found, key=lambda v: (-score(pod_, v), v.name)) if found else None
    return (best.name if best else None), (start + examined) % n


@given(
    st.integers(100, 260),
    st.sampled_from([0, 1, 10, 50, 99, 100]),
    st.lists(st.integers(0, 7), min_size=1, max_size=6),
    st.randoms(use_true_random=False),
)
def test_sampled_search_equals_the_search_spelled_out(n, percentage, sizes, rnd):
    views = [
        NodeView(
            node(f"n{i:03d}", cpu=4000),
            tuple(
                pod(f"r{i}-{j}", 1000, GI, node=f"n{i:03d}", phase="Running")
                for j in range(rnd.randint(0, 4))
            ),
        )
        for i in range(n)
    ]
    sampled = SampledDecide(percentage)
    start = 0
    for k, size in enumerate(sizes):
        new = pod(f"p{k}", cpu=500 * size)
        want_node, want_next = _reference_sampled(new, views, nodes_to_find(percentage, n), start)
        assert sampled(new, views).node == want_node
        assert sampled.next_start == want_next
        start = want_next


@given(st.integers(1, 99), st.lists(st.integers(0, 5000), min_size=1, max_size=8))
def test_below_100_nodes_the_default_search_equals_scoring_every_node(n, cpus):
    views = [
        NodeView(
            node(f"n{i}", cpu=1000 * (i % 5 + 1)), (pod(f"r{i}", 300 * (i % 4), GI, node=f"n{i}"),)
        )
        for i in range(n)
    ]
    sampled = SampledDecide(0)
    for cpu in cpus:
        assert sampled(pod(cpu=cpu), views) == decide(pod(cpu=cpu), views)


def test_the_default_is_kube_schedulers_adaptive_search_and_100_scores_every_node():
    from sample_schedulers.default_like.__main__ import build_parser, make_decide

    default = make_decide(build_parser().parse_args([]))
    assert isinstance(default, SampledDecide) and default.percentage == 0
    assert (
        make_decide(build_parser().parse_args(["--percentage-of-nodes-to-score", "100"])) is decide
    )
    # on 1,000 empty nodes the default stops after 420 feasible ones: the next pod's search
    # starts there, so it lands on another node than an every-node search would pick
    views = [NodeView(node(f"n{i:04d}")) for i in range(1000)]
    assert default(pod("a"), views).node == "n0000" and default.next_start == 420
    assert default(pod("b"), views).node == "n0420"
    assert decide(pod("b"), views).node == "n0000"


def test_percentage_out_of_range_is_a_usage_error(subprocess_env):
    proc = run_cli(subprocess_env, "--percentage-of-nodes-to-score", "150")
    assert proc.returncode == 2
    assert "between 0 and 100" in proc.stderr


# -- end to end: `timewarp simulate` in deterministic mode ---------------------------------------

PLATFORM = ROOT / "examples" / "inputs" / "cluster16.xml"
BURST = ROOT / "examples" / "inputs" / "burst_40_delay170.json"


def simulate(out: Path, env: dict, scheduler: str, platform: Path, workload: Path):
    proc = run_simulate(out, env, scheduler, platform, workload)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "out_jobs.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def burst_runs(tmp_path_factory):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMEWARP_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if not PLATFORM.exists():
        pytest.skip("examples/inputs is not in this checkout")
    cmd = "python -m sample_schedulers.default_like --scheduler-name default"
    outs = [tmp_path_factory.mktemp(f"default_like_burst{i}") for i in range(2)]
    return outs, [simulate(out, env, cmd, PLATFORM, BURST) for out in outs]


def test_burst_on_16_nodes_runs_in_three_waves_without_overallocation(burst_runs):
    outs, (rows, _) = burst_runs
    assert len(rows) == 40
    assert all(r["final_state"] == "COMPLETED_SUCCESSFULLY" for r in rows)
    # 40 single-core 170 s jobs on 16 single-core nodes: waves of 16, 16 and 8. As real
    # Batsim does, the 16 completions at 170 reach the scheduler as 11, then 5 (see
    # simulator/engine.py): 11 pods start at once, the pods that found no node meanwhile
    # wait for their back-off (2 s), the second wave's last 5 start at 172.
    starts = sorted(float(r["starting_time"]) for r in rows)
    assert starts == [0.0] * 16 + [170.0] * 11 + [172.0] * 5 + [340.0] * 8
    assert max(float(r["finish_time"]) for r in rows) == 510.0
    # never two jobs on one node at once, and the first wave uses every node
    by_node: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        by_node.setdefault(r["allocated_resources"], []).append(
            (float(r["starting_time"]), float(r["finish_time"]))
        )
    for spans in by_node.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert len({r["allocated_resources"] for r in rows if float(r["starting_time"]) == 0}) == 16
    manifest = json.loads((outs[0] / "manifest.json").read_text())
    assert manifest["figures"]["rejected_by_kubelet"] == 0


def test_two_runs_give_identical_outputs(burst_runs):
    outs, _ = burst_runs
    for name in ("out_jobs.csv", "out_schedule.csv", "out_machine_states.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name


@given(
    st.lists(st.integers(0, 3), min_size=3, max_size=40),
    st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 4)), min_size=1, max_size=12),
)
def test_scores_kept_on_the_views_give_the_uncached_choice(busy, shapes):
    """Pods of several shapes (some with no cpu or memory request, scored with the
    non-zero defaults) decided one after another on the same views: each pick is the
    uncached best (highest score, ties to the smallest name in natural order)."""
    views = [
        NodeView(
            node(f"node-{i}", cpu=4000, mem=(i % 3 + 1) * 4 * GI),
            tuple(pod(f"r{i}-{j}", 700, GI, node=f"node-{i}", phase="Running") for j in range(k)),
        )
        for i, k in enumerate(busy)
    ]
    for cpu, gib in shapes * 2:  # twice: the second round reads the kept scores
        new = pod(cpu=cpu, mem=gib * GI, nonzero=pod(cpu=cpu or 100, mem=gib * GI or GI).requests)
        fits = [v for v in views if unfit_reason(new, v) is None]
        want = min(fits, key=lambda v: (-score(new, v), natural_key(v.name))) if fits else None
        decision = decide(new, views)
        assert decision.node == (want.name if want else None)
        if want is not None:  # the detail shows the best score: the uncached one
            assert decision.detail.startswith(f"[best scores {want.name}={score(new, want)}")


def test_a_view_scores_a_pod_shape_once(monkeypatch):
    """The second pod of the same shape on unchanged views computes no score."""
    from sample_schedulers.default_like import scoring

    views = [NodeView(node(f"n{i}")) for i in range(5)]
    assert decide(pod("a"), views).node == "n0"
    calls = []
    monkeypatch.setattr(scoring, "_least_allocated", lambda *a: calls.append(a) or 0)
    assert decide(pod("b"), views).node == "n0"
    assert calls == []
    decide(pod("c", cpu=500), views)  # a new shape is scored
    assert len(calls) == 5


def test_a_zero_request_fits_an_over_committed_node():
    """kube-scheduler checks only the resources a pod requests: a node whose cpu is
    over-committed still takes a pod that requests none."""
    over = NodeView(node("n", cpu=1000), (pod("x", cpu=1500, node="n", phase="Running"),))
    assert decide(pod(cpu=0, mem=GI), [over]).node == "n"
    assert decide(pod(cpu=100, mem=GI), [over]).node is None


@settings(max_examples=60, deadline=None)
@given(
    st.integers(100, 180),
    st.sampled_from([0, 30, 100]),
    st.lists(st.tuples(st.sampled_from([0, 500, 1000, 3000]), st.booleans()), max_size=30),
    st.randoms(use_true_random=False),
)
def test_decisions_on_the_cache_s_indexed_views_equal_the_plain_search(n, percentage, pods, rnd):
    """The scheduling loop's steady state: a ``ClusterCache`` whose views change between
    decisions (each pod assumed on its node, running pods ending), pods of a few shapes
    (so that their feasible nodes get indexed). Each decision on ``views()`` (indexed)
    equals the search spelled out on a plain copy (the node, the next start, the best
    score shown) and, in full, the decision of the same search on a plain copy (which
    examines node by node)."""
    cache = ClusterCache()
    for i in range(n):
        cache.upsert_node(node(f"n{i:03d}", cpu=rnd.choice([1000, 2000, 4000])))
    for i in range(n):
        for j in range(rnd.randint(0, 3)):
            cache.upsert_pod(pod(f"r{i}-{j}", 1000, GI, node=f"n{i:03d}", phase="Running"))
    sampled, twin = SampledDecide(percentage), SampledDecide(percentage)
    start = 0
    for k, (cpu, ends) in enumerate(pods):
        new = pod(f"p{k}", cpu=cpu, nonzero=pod(cpu=cpu or 100).requests)
        views = cache.views()
        plain = list(views)
        want_node, want_next = _reference_sampled(new, plain, nodes_to_find(percentage, n), start)
        decision = sampled(new, views)
        assert decision == twin(new, plain)
        assert decision.node == want_node
        assert sampled.next_start == want_next
        start = want_next
        if want_node is not None:
            best = next(v for v in plain if v.name == want_node)
            assert decision.detail.startswith(f"[best scores {want_node}={score(new, best)}")
            cache.assume(new, want_node)
        if ends:
            running = sorted(key for key, p in cache.pods.items() if p.occupies_node)
            if running:
                cache.delete_pod(rnd.choice(running))


def _choice_spelled_out(pod_, fits):
    """choose() without its shortcuts: uncached scores, the natural-order key of each
    tied name, the four runners-up by (-score, name) from the whole list."""
    scored = [(score(pod_, v), v.name) for v in fits]
    top = max(s for s, _ in scored)
    best = min((n for s, n in scored if s == top), key=lambda n: (natural_key(n), n))
    runners_up = heapq.nsmallest(4, ((-s, n) for s, n in scored if n != best))
    shown = ", ".join([f"{best}={top}"] + [f"{n}={-neg}" for neg, n in runners_up])
    more = f", +{len(scored) - 5} more" if len(scored) > 5 else ""
    return best, f"[best scores {shown}{more}]"


@settings(max_examples=200)
@given(
    st.lists(st.integers(0, 3), min_size=1, max_size=60),
    st.integers(0, 59),
    st.sampled_from([0, 700, 1500]),
)
def test_choice_on_the_cache_s_views_equals_the_choice_spelled_out(busy, rotate, cpu):
    """Node names whose plain and natural orders differ (node-10 < node-9 as text), many
    ties or few, fits in examination order (rotated): the pick (natural-order rank per
    NodeViews) and the runners-up shown (the tied names sorted) equal the plain
    computation."""
    views = NodeViews(
        NodeView(
            node(f"node-{i}", cpu=4000),
            tuple(pod(f"r{i}-{j}", 900, GI, node=f"node-{i}", phase="Running") for j in range(k)),
        )
        for i, k in sorted(enumerate(busy), key=lambda item: f"node-{item[0]}")
    )
    new = pod(cpu=cpu, nonzero=pod(cpu=cpu or 100).requests)
    k = rotate % len(views)
    fits = [v for v in views[k:] + views[:k] if unfit_reason(new, v) is None]
    if not fits:
        return
    decision = choose(new, fits, "", natural_order(views))
    assert (decision.node, decision.detail) == _choice_spelled_out(new, fits)
