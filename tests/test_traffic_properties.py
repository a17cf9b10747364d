"""The traffic model's invariants (simulator/traffic): no request lost or duplicated,
processor sharing conserves work and respects the CPU limit, round-robin over Ready
replicas only, and the same inputs give the same rows however time is cut."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.traffic import patterns
from simulator.traffic.costs import Cost
from simulator.traffic.exact import Replica
from simulator.traffic.model import TrafficModel
from simulator.traffic.serving import ReplicaState, TrafficConfig

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def config(**over) -> TrafficConfig:
    base = dict(
        name="web",
        pattern=patterns.constant(30.0),
        process="poisson",
        cost=Cost("exponential", 0.05),
        timeout=2.0,
        duration=120.0,
        tick=10.0,
        lag=0.0,
        model="exact",
        seed=7,
    )
    base.update(over)
    return TrafficConfig(**base)


# a schedule of replica sets: (time, {name: (limit, ready)})
replica_sets = st.lists(
    st.tuples(
        st.floats(0, 120, allow_nan=False),
        st.dictionaries(
            st.sampled_from(["a", "b", "c", "d"]),
            st.tuples(st.sampled_from([0.5, 1.0, 2.0]), st.booleans()),
            max_size=4,
        ),
    ),
    max_size=6,
).map(lambda xs: sorted(xs, key=lambda x: x[0]))


def run(cfg: TrafficConfig, schedule, steps) -> TrafficModel:
    model = TrafficModel(cfg)
    events = [(t, "set", s) for t, s in schedule] + [(t, "advance", None) for t in steps]
    for t, kind, sets in sorted(events, key=lambda e: (e[0], e[1] == "advance")):
        if kind == "set":
            model.set_replicas(
                t, {n: ReplicaState(limit, limit, ready) for n, (limit, ready) in sets.items()}
            )
        else:
            model.advance_to(t)
    model.advance_to(cfg.duration)
    return model


@SETTINGS
@given(schedule=replica_sets, seed=st.integers(0, 2**32), timeout=st.sampled_from([0.2, 2.0, 60.0]))
def test_every_request_ends_exactly_once(schedule, seed, timeout) -> None:
    model = run(config(seed=seed, timeout=timeout), schedule, [])
    rows = model.take_rows()
    t = model.totals
    assert t.arrivals == t.completed + t.timed_out + t.dropped + t.lost + model.in_flight()
    assert sum(r.failed_requests for r in rows) == t.timed_out + t.dropped + t.lost
    assert sum(r.completed_requests for r in rows) == t.completed
    assert round(sum(r.request_rate * 10.0 for r in rows)) == t.arrivals


@SETTINGS
@given(
    arrivals=st.lists(
        st.tuples(st.floats(0, 20, allow_nan=False), st.floats(0.001, 3, allow_nan=False)),
        max_size=40,
    ),
    limit=st.sampled_from([0.25, 1.0, 1.5, 4.0]),
    until=st.floats(0, 60, allow_nan=False),
)
def test_processor_sharing_conserves_work_within_the_limit(arrivals, limit, until) -> None:
    replica = Replica(limit, 0.0)
    latencies: list[float] = []
    finished_cost = 0.0
    arrivals = sorted(arrivals)
    costs = {}
    for seq, (at, cost) in enumerate(arrivals):
        replica.advance(at, latencies)
        replica.accept(at, cost, seq, timeout=1e9)
        costs[seq] = cost
    end = max([until] + [a for a, _ in arrivals])
    replica.advance(end, latencies)
    finished_cost = replica.work_done
    # every CPU-second went to a request: completed ones fully, the rest in part
    assert replica.cpu == pytest.approx(finished_cost + replica.in_flight_work(), abs=1e-6)
    assert replica.cpu <= limit * end + 1e-9
    # a request is never faster than one core allows
    assert len(latencies) == replica.completed
    assert sum(latencies) >= finished_cost - 1e-6


def test_processor_sharing_by_hand() -> None:
    """Two requests of 1 s and 2 s at once on one core: each gets half a core, so the
    first ends at 2 s; the second then has the core alone and ends at 3 s."""
    replica = Replica(1.0, 0.0)
    replica.accept(0.0, 1.0, 0, timeout=100)
    replica.accept(0.0, 2.0, 1, timeout=100)
    latencies: list[float] = []
    replica.advance(10.0, latencies)
    assert latencies == pytest.approx([2.0, 3.0])
    assert replica.cpu == pytest.approx(3.0)
    # with two cores each has one: 1 s and 2 s
    replica = Replica(2.0, 0.0)
    replica.accept(0.0, 1.0, 0, timeout=100)
    replica.accept(0.0, 2.0, 1, timeout=100)
    latencies = []
    replica.advance(10.0, latencies)
    assert latencies == pytest.approx([1.0, 2.0])


def test_a_request_past_its_timeout_fails_and_frees_the_core() -> None:
    replica = Replica(1.0, 0.0)
    latencies: list[float] = []
    replica.accept(0.0, 5.0, 0, timeout=1.0)
    replica.advance(0.5, latencies)
    replica.accept(0.5, 0.3, 1, timeout=1.0)
    replica.advance(10.0, latencies)
    # 0..0.5 alone, then half a core each; at 1.0 the first times out (0.75 s of work
    # done); the second had 0.25 s done and finishes alone at 1.05
    assert replica.expired == 1
    assert latencies == pytest.approx([0.55])
    assert replica.cpu == pytest.approx(1.05)


@SETTINGS
@given(schedule=replica_sets, seed=st.integers(0, 2**32))
def test_round_robin_over_ready_replicas_only(schedule, seed) -> None:
    model = TrafficModel(config(seed=seed, timeout=60.0, process="regular"))
    accepted: dict[str, int] = {}
    # one set per instant (the last one), while the service runs
    schedule = sorted((t, sets) for t, sets in dict(schedule).items() if t < 120)
    for t, sets in schedule:
        model.advance_to(t)
        before = {n: r.accepted for n, r in model.serving.replicas.items()}
        model.set_replicas(
            t, {n: ReplicaState(lim, lim, ready) for n, (lim, ready) in sets.items()}
        )
        nxt = min([tt for tt, _ in schedule if tt > t] + [model.config.duration])
        model.advance_to(nxt)
        got = {n: r.accepted - before.get(n, 0) for n, r in model.serving.replicas.items()}
        ready = [n for n, (_l, r) in sets.items() if r]
        for name, count in got.items():
            if name not in ready:
                assert count == 0, f"{name} was not Ready but got {count} requests"
        if ready:
            counts = [got[n] for n in ready]
            assert max(counts) - min(counts) <= 1, counts
        for name, count in got.items():
            accepted[name] = accepted.get(name, 0) + count


@SETTINGS
@given(
    schedule=replica_sets,
    steps=st.lists(st.floats(0, 120, allow_nan=False), max_size=30),
    model_kind=st.sampled_from(["exact", "fluid"]),
    process=st.sampled_from(["regular", "poisson"]),
)
def test_same_inputs_same_rows_however_time_is_cut(schedule, steps, model_kind, process) -> None:
    cfg = config(model=model_kind, process=process)
    first = run(cfg, schedule, []).take_rows()
    again = run(cfg, schedule, []).take_rows()
    assert [r.csv_values() for r in first] == [r.csv_values() for r in again]
    cut = run(cfg, schedule, steps).take_rows()
    assert len(cut) == len(first)
    for a, b in zip(first, cut, strict=True):
        assert (a.completed_requests, a.failed_requests, a.ready_replicas) == (
            b.completed_requests,
            b.failed_requests,
            b.ready_replicas,
        )
        for x, y in ((a.latency_p99, b.latency_p99), (a.cpu_cores, b.cpu_cores)):
            assert (x is None) == (y is None)
            if x is not None:
                assert math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9)


@given(
    rate=st.floats(0.5, 500),
    process=st.sampled_from(["regular", "poisson"]),
    cuts=st.lists(st.floats(0, 100, allow_nan=False), max_size=10),
)
@SETTINGS
def test_arrivals_do_not_depend_on_chunking(rate, process, cuts) -> None:
    import numpy as np

    from simulator.traffic.arrivals import ArrivalStream

    pattern = patterns.step([[0, rate], [40, rate * 3], [70, 0.0], [80, rate]])
    whole = ArrivalStream(pattern, process, np.random.default_rng(3)).take(100.0)
    stream = ArrivalStream(pattern, process, np.random.default_rng(3))
    parts = [stream.take(t) for t in sorted(cuts)] + [stream.take(100.0)]
    joined = np.concatenate(parts)
    assert joined.shape == whole.shape
    assert np.array_equal(joined, whole)  # the same floats, not just close
    assert np.all(np.diff(joined) >= 0)
    # no arrival while the rate is 0
    assert not np.any((joined > 70 + 1e-9) & (joined < 80 - 1e-9))
    if process == "regular":
        expected = pattern.cumulative(np.array([100.0]))[0]
        assert abs(len(whole) - expected) <= 1


def test_the_rows_are_the_columns_of_the_metrics_table() -> None:
    # out_services.csv's columns are named once (metrics.COLUMNS); a TickRow field out
    # of step with them would write a value under the wrong header
    from dataclasses import fields

    from simulator.traffic.metrics import ROW_FIELDS
    from simulator.traffic.model import TickRow

    assert tuple(f.name for f in fields(TickRow)) == ROW_FIELDS


def test_every_custom_metric_of_the_table_is_sampled_and_served() -> None:
    from broker.facade.metrics import CUSTOM_METRICS
    from broker.facade.resources import BY_GROUP_VERSION
    from simulator.traffic.metrics import CUSTOM_METRIC_NAMES

    model = run(config(), [(0.0, {"a": (1.0, True)})], [])
    _tick, samples = model.published(120.0)
    assert tuple(samples["a"].custom) == CUSTOM_METRIC_NAMES == CUSTOM_METRICS
    served = BY_GROUP_VERSION[("custom.metrics.k8s.io", "v1beta1")]
    assert sorted(served) == sorted(f"pods/{name}" for name in CUSTOM_METRIC_NAMES)
