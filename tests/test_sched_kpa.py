"""sample_schedulers/kpa: Knative's stable/panic-window decision on request concurrency."""

from __future__ import annotations

from sample_schedulers.kpa.__main__ import settings_of
from sample_schedulers.kpa.algorithm import Kpa, Settings


def feed(kpa: Kpa, start: float, end: float, concurrency: float, ready: int) -> int | None:
    desired = None
    t = start
    while t < end:
        kpa.record(t, concurrency)
        desired = kpa.decide(t, ready)
        t += 2.0
    return desired


def test_steady_state_is_ceil_of_concurrency_over_the_per_pod_target() -> None:
    kpa = Kpa()  # target 100 × 70 % = 70 per pod
    assert feed(kpa, 0, 120, 350.0, ready=5) == 5
    kpa = Kpa()
    assert feed(kpa, 0, 120, 351.0, ready=6) == 6
    assert not kpa.panicking


def test_a_burst_panics_at_once_and_panic_never_scales_down() -> None:
    kpa = Kpa()
    assert feed(kpa, 0, 60, 70.0, ready=1) == 1
    # ten times the load: the 6 s panic window (3 ticks) averages (70 + 70 + 700)/3 = 280
    # at once: 4 pods for 1 ready ≥ 200 % → panic; the 60 s stable window would say 2
    kpa.record(60, 700.0)
    assert kpa.decide(60, ready=1) == 4
    assert kpa.panicking
    # two ticks later the panic window is all burst: 10 pods
    assert feed(kpa, 62, 66, 700.0, ready=4) == 10
    # load gone: while panicking the count stays at the panic high water mark
    assert feed(kpa, 66, 100, 70.0, ready=10) == 10
    assert kpa.panicking
    # a stable window after the last over-threshold tick, panic ends; scale-down is
    # limited to half the ready pods per decision (max-scale-down-rate 2)
    desired = feed(kpa, 100, 200, 70.0, ready=10)
    assert not kpa.panicking
    assert desired == 5


def test_no_data_no_decision_and_min_max_scale() -> None:
    kpa = Kpa(Settings(min_scale=2, max_scale=4))
    assert kpa.decide(0, ready=1) is None
    assert feed(kpa, 0, 100, 1.0, ready=2) == 2
    assert feed(kpa, 100, 200, 10_000.0, ready=4) == 4


def test_knative_annotations_set_the_settings() -> None:
    s = settings_of(
        {
            "autoscaling.knative.dev/target": "10",
            "autoscaling.knative.dev/target-utilization-percentage": "100",
            "autoscaling.knative.dev/window": "30s",
            "autoscaling.knative.dev/min-scale": "3",
            "autoscaling.knative.dev/panic-threshold-percentage": "oops",
        },
        allow_zero=False,
    )
    assert (s.per_pod, s.stable_window_s, s.panic_window_s, s.min_scale) == (10.0, 30.0, 3.0, 3)
    assert s.panic_threshold_percent == 200.0  # a bad value falls back to the default
    assert settings_of({}, allow_zero=True).min_scale == 0
    assert settings_of({}, allow_zero=False).min_scale == 1
