"""sample_schedulers/hpa: the HPA's arithmetic as kube-controller-manager does it."""

from __future__ import annotations

import pytest

from sample_schedulers.hpa import algorithm as alg


def pod(name, *, phase="Running", ready=True, changed=0.0, start=0.0, cpu=1.0, deleting=False):
    return alg.Pod(name, phase, ready, changed, start, deleting, {"cpu": cpu})


def sample(value, at=1000.0, window=15.0):
    return alg.Sample(value, at, window)


NOW = 1000.0  # every pod started at 0: past the 300 s cpu initialisation period


def test_desired_is_ceil_of_ready_times_usage_over_target() -> None:
    pods = [pod("a"), pod("b")]
    metrics = {"a": sample(1.0), "b": sample(0.8)}  # 90 % average of a 1-cpu request
    replicas, util, raw = alg.replicas_for_utilization(2, 50, "cpu", pods, metrics, NOW)
    assert (replicas, util) == (4, 90)  # ceil(2 × 90/50) = ceil(3.6)
    assert raw == pytest.approx(0.9)


def test_within_the_tolerance_nothing_changes() -> None:
    pods = [pod("a"), pod("b")]
    metrics = {"a": sample(0.55), "b": sample(0.54)}  # 54 % vs 50 %: ratio 1.09 ≤ 1.1
    assert alg.replicas_for_utilization(2, 50, "cpu", pods, metrics, NOW)[0] == 2
    metrics = {"a": sample(0.56), "b": sample(0.56)}  # ratio 1.12
    assert alg.replicas_for_utilization(2, 50, "cpu", pods, metrics, NOW)[0] == 3


def test_missing_metrics_count_as_full_on_scale_down_and_empty_on_scale_up() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    # two pods at 10 %: a scale-down, but c has no metrics → counted at 100 %:
    # (0.1 + 0.1 + 1.0) / 3 = 40 % of 50 % → ratio 0.8 → ceil(0.8 × 3) = 3: no change
    low = {"a": sample(0.1), "b": sample(0.1)}
    assert alg.replicas_for_utilization(3, 50, "cpu", pods, low, NOW)[0] == 3
    # a scale-up with c missing: counted at 0 → (1 + 1 + 0)/3 = 66 % → ratio 1.33 → 4
    high = {"a": sample(1.0), "b": sample(1.0)}
    assert alg.replicas_for_utilization(3, 50, "cpu", pods, high, NOW)[0] == 4


def test_pending_and_unready_pods_count_as_zero_on_a_scale_up() -> None:
    pods = [pod("a"), pod("b", phase="Pending"), pod("c", ready=False, changed=10.0)]
    metrics = {"a": sample(1.0), "c": sample(1.0)}
    # a alone: 100 % / 50 % → ratio 2; b (pending) and c (never ready) ignored and
    # rebalanced at 0: (1 + 0 + 0)/3 = 33 % → ratio 0.67 < 1: the direction would flip → keep
    assert alg.replicas_for_utilization(3, 50, "cpu", pods, metrics, NOW)[0] == 3
    pods = [pod("a"), pod("b", phase="Pending")]
    metrics = {"a": sample(2.0, window=15)}  # 200 % → with b at 0: 100 % → ratio 2 → 4
    assert alg.replicas_for_utilization(2, 50, "cpu", pods, metrics, NOW)[0] == 4


def test_a_young_pods_sample_must_cover_a_window_after_it_turned_ready() -> None:
    young = pod("a", start=900.0, changed=990.0)  # Ready 10 s ago; window 15 s
    metrics = {"a": sample(1.0, at=1000.0, window=15.0), "b": sample(1.0)}
    ready, ignored, missing = alg._group([young, pod("b")], metrics, "cpu", NOW)
    assert (ready, ignored, missing) == (1, {"a"}, set())
    later = {"a": sample(1.0, at=1006.0, window=15.0), "b": sample(1.0)}
    assert alg._group([young, pod("b")], later, "cpu", 1006.0)[0] == 2


def test_deleted_and_failed_pods_do_not_count() -> None:
    pods = [pod("a"), pod("b", deleting=True), pod("c", phase="Failed")]
    metrics = {"a": sample(1.0), "b": sample(0.0), "c": sample(0.0)}
    assert alg.replicas_for_utilization(1, 50, "cpu", pods, metrics, NOW)[0] == 2


def test_no_metrics_at_all_is_an_error() -> None:
    with pytest.raises(alg.MetricError, match="did not receive metrics for any ready pods"):
        alg.replicas_for_utilization(1, 50, "cpu", [pod("a")], {}, NOW)


def test_average_value_targets() -> None:
    pods = [pod("a"), pod("b")]
    metrics = {"a": sample(30), "b": sample(50)}  # average 40, target 10 → ratio 4 → 8
    assert alg.replicas_for_average_value(2, 10, pods, metrics, NOW) == (8, 40)


def test_without_behavior_scale_down_waits_out_the_300_s_window() -> None:
    n = alg.Normalizer()
    assert n.normalize(None, 1, 10, 1, 30, 0.0)[0] == 4  # scale-up limit max(2×1, 4)
    assert n.normalize(None, 4, 10, 1, 30, 15.0)[0] == 8  # max(2×4, 4)
    assert n.normalize(None, 8, 10, 1, 30, 30.0)[0] == 10
    # load falls: recommendations of 2 are held at the highest of the last 300 s
    for t in range(45, 331, 15):
        desired, conditions = n.normalize(None, 10, 2, 1, 30, float(t))
        assert desired == 10, t
        assert ("AbleToScale", "True", "ScaleDownStabilized") == conditions[0][:3]
    assert n.normalize(None, 10, 2, 1, 30, 345.0)[0] == 2  # the last 10 was at 30 s


def test_default_behavior_limits_scale_up_to_4_pods_or_100_percent_per_15_s() -> None:
    n = alg.Normalizer()
    behavior = {"scaleUp": None, "scaleDown": None}
    desired, conds = n.normalize(behavior, 2, 20, 1, 30, 0.0)
    assert desired == 6  # max(2 + 4, 2 × 2)
    assert ("ScalingLimited", "True", "ScaleUpLimit") == conds[-1][:3]
    n.record_scale(behavior, 2, 6, 0.0)
    # 10 s later the same period still counts the +4: start 2 → max(6, 4) → no more
    assert n.normalize(behavior, 6, 20, 1, 30, 10.0)[0] == 6
    # after the 15 s period: from 6, max(6 + 4, 12) = 12
    assert n.normalize(behavior, 6, 20, 1, 30, 16.0)[0] == 12


def test_behavior_scale_down_policy_and_window() -> None:
    n = alg.Normalizer()
    behavior = {
        "scaleDown": {
            "stabilizationWindowSeconds": 60,
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
        }
    }
    assert n.normalize(behavior, 10, 10, 1, 30, 0.0)[0] == 10
    assert n.normalize(behavior, 10, 4, 1, 30, 30.0)[0] == 10  # the 10 at 0 s is in the window
    desired, conds = n.normalize(behavior, 10, 4, 1, 30, 61.0)
    assert desired == 9  # window passed; 1 pod per 60 s
    assert conds[-1][2] == "ScaleDownLimit"
    n.record_scale(behavior, 10, 9, 61.0)
    assert n.normalize(behavior, 9, 4, 1, 30, 100.0)[0] == 9
    assert n.normalize(behavior, 9, 4, 1, 30, 122.0)[0] == 8


def test_min_and_max_replicas_clamp() -> None:
    n = alg.Normalizer()
    assert n.normalize(None, 3, 100, 2, 5, 0.0)[0] == 5
    n = alg.Normalizer()
    desired, conds = n.normalize(None, 3, 0, 2, 5, 0.0)
    assert desired == 2 and conds[-1][2] == "TooFewReplicas"


def test_closed_form_steady_state_matches_the_traffic_model() -> None:
    """200 req/s of 50 ms on 1-cpu pods at a 50 % target: ceil(200 × 0.05 / 0.5) = 20."""
    from simulator.traffic.model import closed_form_replicas

    assert closed_form_replicas(200, 0.05, 0.5, 1.0) == 20
    pods = [pod(f"p{i}") for i in range(20)]
    metrics = {f"p{i}": sample(0.5) for i in range(20)}
    assert alg.replicas_for_utilization(20, 50, "cpu", pods, metrics, NOW)[0] == 20
