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
