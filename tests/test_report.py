"""The end-of-run report: figures from Batsim's CSVs and the plots."""

from commands import report

JOBS = """job_id,workload_name,profile,submission_time,requested_number_of_resources,requested_time,success,final_state,starting_time,execution_time,finish_time,waiting_time,turnaround_time,stretch,allocated_resources,consumed_energy,metadata
1,w0,delay,0,1,-1,1,COMPLETED_SUCCESSFULLY,0,10,10,0,10,1,0,-1,""
2,w0,delay,0,1,-1,1,COMPLETED_SUCCESSFULLY,0,10,10,0,10,1,0,-1,""
3,w0,delay,0,1,-1,1,COMPLETED_SUCCESSFULLY,10,10,20,10,20,2,1,-1,""
"""
SCHEDULE = """batsim_version,consumed_joules,makespan,max_slowdown,max_turnaround_time,max_waiting_time,mean_slowdown,mean_turnaround_time,mean_waiting_time,nb_computing_machines,nb_grouped_switches,nb_jobs,nb_jobs_finished,nb_jobs_killed,nb_jobs_rejected,nb_jobs_success,nb_machine_switches,scheduling_time,simulation_time,success_rate,time_computing,time_idle,time_sleeping,time_switching_off,time_switching_on,time_unavailable
timewarp,0,20,2,20,10,1.333,13.333,3.333,2,0,3,3,0,0,3,0,0,0,1,30,10,0,0,0,0
"""


def test_figures_and_plots(tmp_path):
    (tmp_path / "out_jobs.csv").write_text(JOBS)
    (tmp_path / "out_schedule.csv").write_text(SCHEDULE)
    stats = {
        "capacity_cores": 2.0,
        "core_seconds": 30.0,
        "rejected_by_kubelet": 0,
        "nondeterministic_advances": 0,
    }
    fig = report.summarise(tmp_path / "out", stats, wall_s=0.5)
    assert fig["makespan"] == 20.0
    assert fig["mean_waiting_time"] == 3.333
    assert fig["nb_jobs"] == 3 and fig["nb_jobs_success"] == 3
    assert fig["utilisation"] == 0.75  # 30 core-seconds of 2 cores x 20 s
    assert fig["speedup"] == 40.0
    written = report.plot(tmp_path / "out", tmp_path)
    assert [p.name for p in written] == ["gantt.png", "utilisation.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_speed_ups_below_one_are_decimals_never_0x():
    assert [report.format_speedup(x) for x in (0.42, 0.0421, 5, 291.3, 1234.5)] == [
        "0.42x", "0.042x", "5.0x", "291x", "1,234x",
    ]  # fmt: skip
    assert report.format_speedup(None) == ""


PARTIAL_NOTHING_ENDED = (
    SCHEDULE.splitlines()[0]
    + "\n"
    + ("4.2.1-timewarp-partial,0,0,0,0,0,0,0,0,2,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n")
)


def test_a_run_where_no_job_ended_says_where_it_stopped(tmp_path):
    """Not "makespan 0.0 s / mean slowdown 0.000" (issue 15 item 8)."""
    import io

    (tmp_path / "out_schedule.csv").write_text(PARTIAL_NOTHING_ENDED)
    (tmp_path / "out_jobs.csv").write_text(JOBS.splitlines()[0] + "\n")
    fig = report.summarise(tmp_path / "out", {}, wall_s=2.0, simulated_s=4321.0)
    assert "makespan" not in fig and "mean_slowdown" not in fig
    fig["outputs"], fig["outputs_dir"] = "partial", str(tmp_path)
    text = io.StringIO()
    report.print_summary(fig, text)
    assert "stopped at simulated t=4,321.0 s" in text.getvalue()
    assert f"outputs in {tmp_path}/" in text.getvalue().splitlines()
    assert "makespan" not in text.getvalue()


def test_an_empty_run_draws_no_plot_and_warns_nothing(tmp_path):
    import warnings

    (tmp_path / "out_jobs.csv").write_text(JOBS.splitlines()[0] + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert report.plot(tmp_path / "out", tmp_path) == []
    assert caught == [] and not list(tmp_path.glob("*.png"))


def test_the_running_pods_curve_is_exact_whole_numbers():
    from commands.plots import _running_steps

    spans = [(0.0, 10.0, True), (0.0, 5.0, True), (5.0, 7.5, True), (10.0, 12.0, True)]
    times, counts = _running_steps(spans)
    # an end and a start at one instant count once, as what runs right after it
    assert list(zip(times.tolist(), counts.tolist(), strict=True)) == [
        (0.0, 2), (5.0, 2), (7.5, 1), (10.0, 1), (12.0, 0),
    ]  # fmt: skip


def test_the_plots_name_the_nodes_and_start_at_zero(tmp_path, monkeypatch):
    from commands import plots

    seen = {}
    real_save = plots._save

    def save(fig, path):
        seen[path.name] = [
            ([t.get_text() for t in ax.get_yticklabels()], ax.get_ylabel(), ax.get_ylim())
            for ax in fig.axes
        ]
        return real_save(fig, path)

    monkeypatch.setattr(plots, "_save", save)
    (tmp_path / "out_jobs.csv").write_text(JOBS)
    written = report.plot(tmp_path / "out", tmp_path, ["alpha", "beta"])
    assert [p.name for p in written] == ["gantt.png", "utilisation.png"]
    [(gantt_labels, gantt_axis, _)] = seen["gantt.png"]
    assert gantt_labels == ["alpha", "beta"] and gantt_axis == "node"
    (top_ticks, top_axis, top_ylim), (heat_labels, _, _), _bar = seen["utilisation.png"]
    assert top_axis == "running pods" and top_ylim[0] == 0
    assert all(float(t.replace("−", "-")).is_integer() for t in top_ticks if t)
    assert heat_labels == ["alpha", "beta"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_progress_bar_ends_on_the_summarys_figures():
    """The last frame: the simulated time at the end and the speed-up of the summary,
    from the same wall time (issue 15 item 11: it showed 600 s / 291x beside 207x)."""
    from commands.simulating.progress import ProgressView

    view = ProgressView(40, disabled=True, started=0.0, prog="timewarp simulate")
    view.finish(600.0, 2.9)
    fields = view.progress.tasks[0].fields
    assert fields["now"] == "600 s" and fields["wall"] == "2.9 s"
    assert fields["speedup"] == report.format_speedup(report.speedup(600.0, 2.9)) == "207x"


def test_pods_left_for_later_bursts_are_in_the_summary_only_when_some_are(tmp_path):
    """issue 27 item 2: a controller asked for more pods than it can create says so at the end."""
    import io

    (tmp_path / "out_jobs.csv").write_text(JOBS)
    (tmp_path / "out_schedule.csv").write_text(SCHEDULE)
    texts = []
    for deferred in (0, 999_998_498):
        fig = report.summarise(tmp_path / "out", {"pods_deferred": deferred}, wall_s=1.0)
        text = io.StringIO()
        report.print_summary(fig, text)
        texts.append(text.getvalue())
    assert "never created" not in texts[0]
    assert "999,998,498" in texts[1] and "CreationsDeferred" in texts[1]


def test_a_hidden_progress_bar_does_no_work_per_message():
    """Under -q (or without a terminal) the view is called after every Batsim message and
    shows nothing: it must not format fields nor update rich's task (issue 29)."""
    from types import SimpleNamespace

    from commands.simulating.progress import ProgressView

    view = ProgressView(40, disabled=True, started=0.0, prog="timewarp simulate")
    view.update(SimpleNamespace(now_s=600.0, jobs_done=7, jobs_dynamic=3))
    task = view.progress.tasks[0]
    assert task.completed == 0 and task.fields["now"] == "0 s" and view.jobs_dynamic == 0


def test_jobs_and_deleted_controller_pods_are_counted_from_jobs_csv(tmp_path):
    """Without a schedule.csv (a partial run): the rows of jobs.csv, read one at a time."""
    killed = '4,k8s,delay,0,1,-1,0,COMPLETED_KILLED,0,5,5,0,5,1,0,-1,""\n'
    failed = '5,w0,delay,0,1,-1,0,COMPLETED_KILLED,0,5,5,0,5,1,0,-1,""\n'
    (tmp_path / "out_jobs.csv").write_text(JOBS + killed + killed.replace("4,", "6,", 1) + failed)
    fig = report.summarise(tmp_path / "out", {}, wall_s=1.0)
    assert fig["nb_jobs"] == 6 and fig["controller_pods_deleted"] == 2
