"""`timewarp compare` and `timewarp report`: the figures of runs side by side, the best
marked, replicates summed up with their spread, sameness of inputs and seeds, and the HTML
report as a browser draws it."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from browser import dump_dom, screenshot

from commands.comparing.figures import Group, sameness
from commands.comparing.html import render
from commands.comparing.runs import read_run
from commands.comparing.table import rows

ROOT = Path(__file__).resolve().parent.parent
JOB_FIELDS = ["job_id", "workload_name", "profile", "submission_time", "requested_number_of_resources",
              "requested_time", "success", "final_state", "starting_time", "execution_time",
              "finish_time", "waiting_time", "turnaround_time", "stretch", "allocated_resources",
              "consumed_energy", "metadata"]  # fmt: skip
SERVICE_FIELDS = ["time", "service", "desired_replicas", "ready_replicas", "request_rate",
                  "latency_p50", "latency_p95", "latency_p99", "failed_requests",
                  "cpu_utilisation", "completed_requests", "timed_out_requests",
                  "dropped_requests", "mean_concurrency", "cpu_cores"]  # fmt: skip


def make_run(folder: Path, waits: list[float], replicas: int, *, seed=None, inputs="abc",
             failed=0, p99=0.2, service_pod=True) -> Path:  # fmt: skip
    """A run folder as `timewarp simulate -o` leaves it: jobs of 100 s on 4 nodes, one
    service ticking every 15 s for 600 s."""
    folder.mkdir(parents=True)
    with open(folder / "out_jobs.csv", "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(JOB_FIELDS)
        for i, wait in enumerate(waits):
            start = 10 * i + wait
            out.writerow([i + 1, "w0", "p", 10 * i, 1, -1, 1, "COMPLETED_SUCCESSFULLY", start,
                          100, start + 100, wait, wait + 100, (wait + 100) / 100, i % 4, -1, ""])  # fmt: skip
        if service_pod:  # a service's pod: a controller's job, not a batch job
            out.writerow(["default.web-1", "k8s", "d", 0, 1, -1, 1, "COMPLETED_SUCCESSFULLY",
                          0, 600, 600, 0, 600, 1, 3, -1, ""])  # fmt: skip
    with open(folder / "out_machine_states.csv", "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["time", "nb_sleeping", "nb_switching_on", "nb_switching_off", "nb_idle",
                      "nb_computing"])  # fmt: skip
        out.writerows([[0, 0, 0, 0, 4, 0], [10, 0, 0, 0, 2, 2], [400, 0, 0, 0, 4, 0]])
    with open(folder / "out_services.csv", "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(SERVICE_FIELDS)
        for t in range(15, 601, 15):
            out.writerow([t, "web", replicas, replicas, 10, 0.05, 0.1, p99,
                          failed if t == 300 else 0, 0.5, 150, 0, 0, 1, 1])  # fmt: skip
    manifest = {"inputs": {"p.xml": "p" + inputs, "w.json": "w" + inputs},
                "schedulers": ["python -m sample_schedulers.default_like"],
                "figures": {"wall_s": 1.5, "nondeterministic_advances": 0, "simulated_s": 600}}  # fmt: skip
    if seed is not None:
        manifest["seed"] = seed
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _cli(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "timewarp", *map(str, args)],
        env=env, capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip


def _table(groups):
    return {(sec, label): cells for sec, label, cells in rows(groups)}


def test_figures_of_two_runs_and_the_best_marked(tmp_path):
    a = read_run(make_run(tmp_path / "a", [0, 0, 10, 20], replicas=2))
    b = read_run(make_run(tmp_path / "b", [0, 50, 60, 70], replicas=3, failed=30, p99=0.4))
    table = _table([Group("a", [a]), Group("b", [b])])
    assert table[("batch", "batch jobs")] == ["4", "4"]  # the service pod is not a batch job
    assert table[("batch", "waiting time mean (s)")] == ["★ 7.5", "45.0"]
    assert table[("batch", "waiting time p50 (s)")] == ["★ 5.0", "55.0"]
    assert table[("batch", "makespan (s)")] == ["★ 150.0", "200.0"]
    assert table[("batch", "slowdown p99")][0].startswith("★")
    svc = "service web"
    assert table[(svc, "replica-hours")] == ["★ 0.33", "0.50"]  # 2 and 3 pods for 600 s
    assert table[(svc, "failed requests")] == ["★ 0", "30"]
    assert table[(svc, "latency p99 (s, tick-weighted)")] == ["★ 0.2000", "0.4000"]
    assert table[(svc, "Ready replicas (time average)")] == ["2.00", "3.00"]  # no "better"
    # run cost apart, never marked
    assert table[("run cost (not a result)", "wall time of the simulation (s)")] == ["1.50"] * 2
    # nodes busy: 2 of 4 from 10 s to 400 s of a 600 s run
    assert a.figures["utilisation_mean"] == pytest.approx(0.5 * 390 / 600)


def test_replicates_are_summed_up_with_their_spread(tmp_path):
    runs = [read_run(make_run(tmp_path / f"s{i}", [w, w], replicas=2, seed=i))
            for i, w in enumerate((10, 30, 20))]  # fmt: skip
    other = read_run(make_run(tmp_path / "o", [5, 5], replicas=2, seed=0))
    table = _table([Group("x", runs), Group("y", [other])])
    assert table[("batch", "waiting time mean (s)")] == ["20.0 ± 10.0 [10.0–30.0]", "★ 5.0"]
    assert table[("service web", "replica-hours")] == ["0.33 (×3)", "0.33"]


def _group(tmp_path, label, waits):
    return Group(label, [read_run(make_run(tmp_path / f"{label}{i}", [w], replicas=1, seed=i))
                         for i, w in enumerate(waits)])  # fmt: skip


def test_the_best_mean_is_marked_within_the_spread_when_ranges_overlap(tmp_path):
    skewed = _group(tmp_path, "x", (10, 12, 50))  # mean 24, median 12: the mean decides
    narrow = _group(tmp_path, "z", (15, 16, 17))
    clear = _group(tmp_path, "c", (1, 2, 3))
    table = _table([skewed, narrow])
    assert table[("batch", "waiting time mean (s)")] == [
        "24.0 ± 22.5 [10.0–50.0]",
        "(★) 16.0 ± 1.0 [15.0–17.0]",  # best mean; 17 > 10: x's seeds reach below it
    ]
    table = _table([skewed, narrow, clear])
    assert table[("batch", "waiting time mean (s)")][2] == "★ 2.0 ± 1.0 [1.0–3.0]"
    # a run that has no value for the figure: the others' count is shown
    empty = read_run(make_run(tmp_path / "e", [], replicas=1))
    table = _table([Group("x", [*skewed.runs, empty]), narrow])
    assert table[("batch", "waiting time mean (s)")][0] == "24.0 ± 22.5 [10.0–50.0] n=3"


def test_the_command_says_whether_inputs_and_seeds_were_the_same(tmp_path, subprocess_env):
    make_run(tmp_path / "a", [0, 1], replicas=1, seed=1)
    make_run(tmp_path / "b", [0, 1], replicas=1, seed=2)
    make_run(tmp_path / "c", [0, 1], replicas=1, seed=1, inputs="other")
    out = _cli(subprocess_env, "compare", tmp_path / "a", tmp_path / "b")
    assert out.returncode == 0, out.stderr
    assert "inputs (by content): the same" in out.stdout and "seeds: 1, 2" in out.stdout
    out = _cli(subprocess_env, "compare", f"first={tmp_path / 'a'}", f"second={tmp_path / 'c'}")
    assert (
        "inputs (by content): different between columns" in out.stdout
        and "seeds: the same" in out.stdout
    )
    assert "first" in out.stdout and "second" in out.stdout


def test_a_folder_that_is_not_a_run_exits_2(tmp_path, subprocess_env):
    make_run(tmp_path / "a", [0], replicas=1)
    out = _cli(subprocess_env, "compare", tmp_path / "a", tmp_path)
    assert out.returncode == 2 and "not a run's folder (no out_jobs.csv" in out.stderr
    out = _cli(subprocess_env, "compare", f"x={tmp_path / 'a'}", f"x={tmp_path / 'a'}")
    assert out.returncode == 2 and "the label 'x' is given twice" in out.stderr


def _colour_pixels(png: Path, rgb: tuple[int, int, int]) -> int:
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB"), dtype=int)
    return int((np.abs(pixels - np.array(rgb)).max(axis=2) <= 12).sum())


def test_the_html_report_draws_in_a_browser(tmp_path, subprocess_env):
    make_run(tmp_path / "a", [0, 0, 10, 20], replicas=2, seed=1)
    make_run(tmp_path / "b", [0, 50, 60, 70], replicas=3, seed=2, failed=30)
    page = tmp_path / "report.html"
    out = _cli(subprocess_env, "compare", f"default={tmp_path / 'a'}", f"mine={tmp_path / 'b'}",
               "--html", page, "--slo-p99", "0.3")  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = page.read_text()
    assert "http://" not in text and "https://" not in text  # nothing fetched: opens offline
    dom = dump_dom(page, tmp_path)
    # every plot decoded (data URIs), and there are the ones a comparison draws
    images = int(dom.split('data-images="')[1].split('"')[0])
    assert images == 7  # 2 ECDFs, nodes busy, node load, 3 for the service
    assert f'data-images-decoded="{images}"' in dom
    assert 'class="best">7.5<' in dom  # the better mean waiting time, in green
    assert "seeds</td><td>1, 2" in dom
    shot = screenshot(page, tmp_path / "shot.png", tmp_path)
    # both runs' colours are drawn (plots, not blank images)
    assert _colour_pixels(shot, (0x1F, 0x77, 0xB4)) > 500
    assert _colour_pixels(shot, (0xD6, 0x27, 0x28)) > 500
    assert _colour_pixels(shot, (0xDD, 0xFF, 0xDD)) > 200  # the best cells' green


def test_report_of_one_run(tmp_path, subprocess_env):
    make_run(tmp_path / "a", [0, 3], replicas=1)
    out = _cli(subprocess_env, "report", tmp_path / "a", "--html", tmp_path / "r.html")
    assert out.returncode == 0, out.stderr
    assert "timewarp report: a" in out.stdout and "★" not in out.stdout
    assert "inputs (by content)" not in out.stdout  # nothing to compare with
    assert "<h2>Runs</h2>" in (tmp_path / "r.html").read_text()


def test_a_partial_run_says_so_beside_its_figures(tmp_path):
    a = make_run(tmp_path / "a", [0, 1], replicas=1)
    b = make_run(tmp_path / "b", [0, 1], replicas=1)
    manifest = json.loads((b / "manifest.json").read_text())
    (b / "manifest.json").write_text(json.dumps({**manifest, "outputs": "partial"}))
    for folder in (a,):
        manifest = json.loads((folder / "manifest.json").read_text())
        (folder / "manifest.json").write_text(json.dumps({**manifest, "outputs": "complete"}))
    table = _table([Group("a", [read_run(a)]), Group("b", [read_run(b)])])
    assert table[("run cost (not a result)", "outputs")] == ["complete", "PARTIAL"]
    complete = _table([Group("a", [read_run(a)])])
    assert ("run cost (not a result)", "outputs") not in complete


def test_the_first_placement_that_differs_is_named(tmp_path):
    a = read_run(make_run(tmp_path / "a", [0, 0, 10, 20], replicas=1), "a")
    b = read_run(make_run(tmp_path / "b", [0, 50, 10, 20], replicas=1), "b")
    same = read_run(make_run(tmp_path / "c", [0, 0, 10, 20], replicas=1), "c")
    verdict = sameness([Group("a", [a]), Group("b", [b]), Group("c", [same])])
    # without decision logs: the jobs' placements as they landed
    assert verdict["first decision that differs"] == (
        "job 2: a started it at 10.0 s on res 1, b at 60.0 s on res 1 | none: c decided as a"
    )


DECISION_HEADER = "time,actor,action,kind,namespace,name,target,job_id\n"


def test_the_first_decision_that_differs_comes_from_the_decision_logs(tmp_path):
    folders = [make_run(tmp_path / n, [0, 0], replicas=1) for n in ("a", "b", "c")]
    common = "0,scheduler-0,bind,Pod,default,w0.1,n1,w0!1\n"
    (folders[0] / "out_decisions.csv").write_text(
        DECISION_HEADER + common + "5,scheduler-0,bind,Pod,default,w0.2,n2,w0!2\n"
    )
    (folders[1] / "out_decisions.csv").write_text(
        DECISION_HEADER + common + "5,scheduler-1,bind,Pod,default,w0.2,n3,w0!2\n"
    )
    (folders[2] / "out_decisions.csv").write_text(DECISION_HEADER + common)
    a, b, c = (read_run(f, f.name) for f in folders)
    verdict = sameness([Group("a", [a]), Group("b", [b]), Group("c", [c])])
    assert verdict["first decision that differs"] == (
        "decision #2: a: bind Pod default/w0.2 -> n2 at 5.0 s (scheduler-0); "
        "b: bind Pod default/w0.2 -> n3 at 5.0 s (scheduler-1) | "
        "decision #2: a: bind Pod default/w0.2 -> n2 at 5.0 s (scheduler-0); "
        "c took no more decisions"
    )
    page = render([Group("a", [a]), Group("b", [b])], "t")
    assert "<tr><td>scheduler-0: bind</td><td>2</td><td>1</td></tr>" in page
    assert "<tr><td>scheduler-1: bind</td><td>0</td><td>1</td></tr>" in page
    same = read_run(folders[0], "again")
    assert (
        sameness([Group("a", [a]), Group("again", [same])])["first decision that differs"]
        == "none: again decided as a"
    )


def test_bad_options_exit_2_naming_them(tmp_path, subprocess_env):
    make_run(tmp_path / "a", [0], replicas=1)
    out = _cli(subprocess_env, "report", tmp_path / "a", "--slo-p99", "-1")
    assert out.returncode == 2 and "--slo-p99: expected seconds > 0" in out.stderr
    (tmp_path / "file").write_text("")
    out = _cli(subprocess_env, "report", tmp_path / "a", "--html", tmp_path / "file" / "r.html")
    assert out.returncode == 2 and "--html" in out.stderr and "cannot write" in out.stderr
