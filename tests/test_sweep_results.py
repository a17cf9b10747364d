"""Tables and plots of a sweep, from result records (no simulation needed)."""

from __future__ import annotations

import csv
import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commands.sweeping import results as tables

COLUMNS = ["scheduler", "mode", "timeout-value"]


def record(run_id, scheduler, mode, timeout, replicate):
    factors = {"scheduler": scheduler, "mode": mode}
    if timeout is not None:
        factors["timeout-value"] = timeout
    return {"run_id": run_id, "factors": factors, "replicate": replicate, "seed": replicate}


def ok(makespan, wall=1.0):
    return {
        "status": "ok",
        "figures": {"makespan": makespan, "mean_waiting_time": 0.5, "wall_s": wall},
        "peak_rss_bytes": 100 * 2**20,
        "result_bytes": 4096,
    }


def test_t_quantiles_match_the_table_and_tend_to_the_normal():
    assert tables.t975(1) == pytest.approx(12.706)
    assert tables.t975(9) == pytest.approx(2.262)
    assert tables.t975(1000) == pytest.approx(1.96, abs=0.01)
    with pytest.raises(ValueError):
        tables.t975(0)


def test_summary_has_mean_sd_and_ci_per_point_and_ignores_failed_runs():
    rows = [
        tables.run_row(record("a", "s", "lockstep", 5, 0), ok(10.0), COLUMNS),
        tables.run_row(record("b", "s", "lockstep", 5, 1), ok(14.0), COLUMNS),
        tables.run_row(
            record("c", "s", "lockstep", 5, 2), {"status": "failed", "error": "boom"}, COLUMNS
        ),
        tables.run_row(record("d", "s", "deterministic", None, 0), ok(12.0), COLUMNS),
        tables.run_row(record("e", "s", "deterministic", None, 1), None, COLUMNS),
    ]
    assert rows[2]["error"] == "boom" and rows[2]["makespan"] == ""
    assert rows[4]["status"] == "not run"
    assert rows[0]["peak_rss_mb"] == 100.0
    summary = tables.summarise(rows, COLUMNS)
    assert len(summary) == 2
    lock, det = summary
    assert (lock["n_runs"], lock["n_ok"], lock["n_failed"]) == (3, 2, 1)
    assert lock["makespan_mean"] == 12.0
    assert lock["makespan_sd"] == pytest.approx(math.sqrt(8))
    assert lock["makespan_ci95"] == pytest.approx(12.706 * math.sqrt(8) / math.sqrt(2), rel=1e-5)
    assert det["timeout-value"] == ""
    assert det["makespan_mean"] == 12.0 and det["makespan_sd"] == ""  # one value: no σ
    # the spread over seeds: the successful runs' seeds, how many, lowest and highest
    assert (lock["seeds"], lock["makespan_n"]) == ("0 1", 2)
    assert (lock["makespan_min"], lock["makespan_max"]) == (10.0, 14.0)
    assert (det["makespan_min"], det["makespan_max"], det["makespan_n"]) == (12.0, 12.0, 1)
    assert {"seeds", "makespan_n", "makespan_min", "makespan_max"} <= set(
        tables.summary_columns(COLUMNS)
    )


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=2, max_size=40))
def test_the_confidence_interval_is_centred_on_the_mean_and_shrinks_with_agreement(values):
    mean, sd, ci = tables.mean_sd_ci(values)
    assert mean == pytest.approx(statistics.fmean(values))
    assert sd >= 0 and ci >= 0
    assert ci == pytest.approx(tables.t975(len(values) - 1) * sd / math.sqrt(len(values)))
    same = tables.mean_sd_ci([values[0]] * len(values))
    assert same[1] == pytest.approx(0, abs=1e-6 * max(1.0, values[0]))


def test_csv_files_have_the_documented_columns(tmp_path):
    rows = [tables.run_row(record("a", "s", "lockstep", 5, 0), ok(10.0), COLUMNS)]
    tables.write_csv(tmp_path / "runs.csv", tables.runs_columns(COLUMNS), rows)
    with open(tmp_path / "runs.csv") as f:
        header = next(csv.reader(f))
    for col in ("run_id", *COLUMNS, "replicate", "seed", "status", "error", "makespan",
                "mean_waiting_time", "mean_slowdown", "utilisation", "wall_s", "speedup",
                "nondeterministic_advances"):  # fmt: skip
        assert col in header
    assert not (tmp_path / "runs.csv.tmp").exists()


def test_plots_draw_each_metric_against_each_varying_factor(tmp_path):
    rows = []
    for i, (mode, timeout, value) in enumerate(
        [("lockstep", 5, 20.0), ("lockstep", 5, 22.0), ("lockstep", 50, 40.0),
         ("lockstep", 50, 44.0), ("deterministic", None, 12.0), ("deterministic", None, 12.0)]
    ):  # fmt: skip
        rows.append(tables.run_row(record(str(i), "s", mode, timeout, i % 2), ok(value), COLUMNS))
    summary = tables.summarise(rows, COLUMNS)
    written = tables.plot_summary(summary, COLUMNS, tmp_path / "plots")
    # scheduler has one level: no plot against it; mode and timeout-value vary; the run
    # costs (wall time) apart from the results
    assert sorted(p.name for p in written) == [
        "mode-cost.png", "mode.png", "timeout-value-cost.png", "timeout-value.png"
    ]  # fmt: skip
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_duration_levels_sort_by_their_value():
    assert tables._as_number("50ms") == pytest.approx(0.05)
    assert tables._as_number("2s") == 2.0 and tables._as_number("1.5min") == 90.0
    assert tables._as_number("fast") is None and tables._as_number(True) is None
    levels = ["100ms", "5ms", "1s", "20ms"]
    assert sorted(levels, key=tables._as_number) == ["5ms", "20ms", "100ms", "1s"]


def _summary_for_panels(failed_point=True):
    rows = []
    for i, (scheduler, load, value) in enumerate(
        [("default_like", 1, 10.0), ("default_like", 1, 12.0), ("kcss", 1, 10.0),
         ("kcss", 1, 12.0), ("default_like", 2, 20.0), ("kcss", 2, 20.0)]
    ):  # fmt: skip
        rows.append(
            tables.run_row(
                record2(str(i), scheduler, load, i % 2), ok(value), ["scheduler", "load"]
            )
        )
    if failed_point:
        for i in range(2):
            rows.append(tables.run_row(record2(f"f{i}", "broken", 1, i),
                                       {"status": "failed", "error": "x"}, ["scheduler", "load"]))  # fmt: skip
    return tables.summarise(rows, ["scheduler", "load"])


def record2(run_id, scheduler, load, replicate):
    return {"run_id": run_id, "factors": {"scheduler": scheduler, "load": load},
            "replicate": replicate, "seed": replicate}  # fmt: skip


def _draw(summary, factor, metric="makespan"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [c for c in ("scheduler", "load") if c != factor]
    levels = list(dict.fromkeys(r[factor] for r in summary))
    numeric = all(tables._as_number(v) is not None for v in levels)
    position = {lv: (tables._as_number(lv) if numeric else i) for i, lv in enumerate(levels)}
    fig, ax = plt.subplots()
    tables._panel(ax, summary, metric, tables._Axis(factor, others, levels, position, numeric))
    return fig, ax


def test_scheduler_names_are_categories_points_without_lines_and_series_set_apart():
    summary = _summary_for_panels(failed_point=False)
    fig, ax = _draw(summary, "scheduler")
    series = {c.get_label(): c.lines[0] for c in ax.containers}
    assert set(series) == {"load=1", "load=2"}
    assert all(ln.get_linestyle() == "None" for ln in series.values())  # no line between names
    xs = {label: list(ln.get_xdata()) for label, ln in series.items()}
    assert xs["load=1"] != xs["load=2"]  # set apart: identical series stay visible
    assert len({ln.get_marker() for ln in series.values()}) == 2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["default_like", "kcss"]
    # a numeric factor is still an axis of numbers with lines
    fig, ax = _draw(summary, "load")
    lines = [c.lines[0] for c in ax.containers]
    assert len(lines) == 2 and all(ln.get_linestyle() == "-" for ln in lines)


def test_a_point_where_every_run_failed_is_drawn_as_failed():
    summary = _summary_for_panels()
    broken = [r for r in summary if r["scheduler"] == "broken"]
    assert broken[0]["n_ok"] == 0 and broken[0]["makespan_mean"] == ""
    fig, ax = _draw(summary, "scheduler")
    crosses = [ln for ln in ax.lines if ln.get_marker() == "x"]
    assert len(crosses) == 1 and crosses[0].get_label() == "every run failed"
    assert list(crosses[0].get_xdata()) == [pytest.approx(2, abs=0.2)]  # at "broken"
    assert "broken" in [t.get_text() for t in ax.get_xticklabels()]


def test_service_figures_are_columns_of_both_tables(tmp_path):
    services = {"web": {"requests": 100, "failed": 5, "failed_share": 0.05, "latency_p99": 0.3,
                        "replica_hours": 1.5, "replicas_max": 4}}  # fmt: skip
    columns = tables.service_columns(["web"])
    assert "web.failed_share" in columns and "web.replica_hours" in columns
    rows = [
        tables.run_row(record("a", "s", "lockstep", 5, 0), ok(10.0), COLUMNS, services),
        tables.run_row(
            record("b", "s", "lockstep", 5, 1),
            ok(10.0),
            COLUMNS,
            {"web": {**services["web"], "failed": 7}},
        ),  # fmt: skip
    ]
    assert rows[0]["web.failed"] == 5 and rows[0]["web.latency_p95"] == ""
    header = tables.runs_columns(COLUMNS, columns)
    # results first, the run costs after them
    assert header.index("web.failed") < header.index("wall_s")
    summary = tables.summarise(rows, COLUMNS, columns)
    assert summary[0]["web.failed_mean"] == 6 and summary[0]["web.replica_hours_sd"] == 0
    assert "web.failed_ci95" in tables.summary_columns(COLUMNS, columns)
    written = tables.plot_summary(
        summary + [dict(summary[0], mode="x")], COLUMNS, tmp_path, columns
    )
    assert (tmp_path / "mode.png") in written
