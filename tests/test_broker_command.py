"""`timewarp broker`: the broker alone, with the simulator and the scheduler started by
hand as Batkube was used (issue 15 item 4) — three terminals, here three processes."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from simulator.testing import write_platform, write_workload

ROOT = Path(__file__).resolve().parent.parent
POLLER = ROOT / "tests" / "programs" / "polling_scheduler.py"
PROFILES = {
    "short": {"type": "delay", "delay": 10, "cpu": "1", "scheduler": "default-scheduler"},
    "endless": {"type": "delay", "delay": 10**7, "cpu": "1", "scheduler": "default-scheduler"},
}


def timewarp(*args: str, env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "timewarp", *args],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True, **kw,
    )  # fmt: skip


def wait_for(predicate, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        pause.wait(0.1)


def env_file(path: Path) -> dict[str, str]:
    """The `export KEY=VALUE` lines of NAME.env, as `source` would read them."""
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        out[key] = shlex.split(value)[0]
    return out


@pytest.fixture
def inputs(tmp_path):
    platform = write_platform(tmp_path / "p.xml", 2, 1)
    jobs = [{"id": str(i), "subtime": 0, "res": 1, "profile": "short"} for i in (1, 2, 3)]
    return platform, write_workload(tmp_path / "w.json", jobs, PROFILES)


class Terminals:
    """The processes a test starts, killed at the end whatever happened."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, proc: subprocess.Popen) -> subprocess.Popen:
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture
def terminals():
    t = Terminals()
    yield t
    t.close()


WAITING = re.compile(r"waiting for the simulator on tcp://127\.0\.0\.1:(\d+);")


def start_broker(terminals, out, env, *extra):
    """The broker on a port it chose (-s …:0, said as it waits): a port the test picked
    free and released could be taken by another test's server before the broker binds
    it. Returns the process, its stderr lines so far (a thread keeps reading) and the
    port."""
    broker = terminals.start(
        timewarp("broker", "-o", str(out), "-s", "tcp://127.0.0.1:0", *extra, env=env)
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(broker.stderr), daemon=True)
    reader.start()
    wait_for(lambda: any(WAITING.search(ln) for ln in lines), "the broker")
    port = next(int(m.group(1)) for ln in lines if (m := WAITING.search(ln)))
    return broker, lines, reader, port


def test_a_scheduler_and_a_simulator_started_by_hand(tmp_path, subprocess_env, inputs, terminals):
    platform, workload = inputs
    out = tmp_path / "out"
    broker, lines, reader, port = start_broker(terminals, out, subprocess_env, "--expect", "sched")
    assert any("source " in ln and "sched.env" in ln for ln in lines)  # the next steps, said
    assert (out / "sched.env").stat().st_mode & 0o077 == 0  # credentials: the owner's only
    sched_env = {**subprocess_env, **env_file(out / "sched.env")}
    terminals.start(timewarp("run", "--name", "sched", "--", "python", str(POLLER), env=sched_env))
    sim = terminals.start(
        timewarp("sim", "-q", "-p", str(platform), "-w", str(workload), "-e", str(out / "out"),
                 "--enable-compute-sharing", "--enable-dynamic-jobs",
                 "-s", f"tcp://127.0.0.1:{port}", env=subprocess_env)
    )  # fmt: skip
    assert sim.wait(180) == 0, sim.stderr.read()
    assert broker.wait(120) == 0
    reader.join(10)
    text = "".join(lines)
    assert "timewarp broker" in text and "outputs in " in text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ok"] is True and manifest["outputs"] == "complete"
    assert manifest["figures"]["nb_jobs_success"] == 3


# a stall guard longer than any test's own bound on its processes: a test whose outcome
# must not depend on how loaded the machine is (the guard's default: 10 s of wall time)
NO_STALL_GUARD = "3600"

ONCE = """import sys, time
from kubernetes import client, config
config.load_kube_config()
time.sleep(2)
print(len(client.CoreV1Api().list_node().items), "nodes", flush=True)
sys.exit(int(sys.argv[1]))
"""


# a hang guard, not a timing: at load 28 on 2 CPUs a good run took 192 s of wall time
@pytest.mark.timeout(600)
@pytest.mark.parametrize("code", [0, 3])
def test_a_scheduler_started_by_hand_that_exits(tmp_path, subprocess_env, inputs, terminals, code):
    """Exit 0 of a process started by hand ends only that process and the run goes on,
    as for the launcher's own (issue 25's "program exit is not failure"); any other exit
    fails the run, naming the code. `timewarp run` tells the broker the code: the
    process is not the broker's child."""
    platform, workload = inputs
    out = tmp_path / "out"
    once = tmp_path / "once.py"
    once.write_text(ONCE)
    # `once` builds CoreV1Api (a long import, ~1 s idle, >10 s at load 15) after its first
    # wait: past the stall guard's 10 s of wall time the broker lets time move without it
    # (a non-deterministic advance), the run can end first, and the exit under test never
    # counts. What the test pins needs no wall-clock bound: none the load can reach here.
    broker, lines, reader, port = start_broker(
        terminals, out, subprocess_env, "--expect", "sched", "--expect", "once",
        "--stall-timeout", NO_STALL_GUARD,
    )  # fmt: skip
    for name, argv in (("sched", [str(POLLER)]), ("once", [str(once), str(code)])):
        env = {**subprocess_env, **env_file(out / f"{name}.env")}
        terminals.start(timewarp("run", "--name", name, "--", "python", *argv, env=env))
    sim = terminals.start(
        timewarp("sim", "-q", "-p", str(platform), "-w", str(workload), "-e", str(out / "out"),
                 "--enable-compute-sharing", "--enable-dynamic-jobs",
                 "-s", f"tcp://127.0.0.1:{port}", env=subprocess_env)
    )  # fmt: skip
    assert broker.wait(480) == (0 if code == 0 else 1), "".join(lines)[-3000:]
    sim.wait(60)
    reader.join(10)
    assert (out / "once.exit").read_text().strip() == str(code)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["figures"]["nondeterministic_advances"] == 0
    if code == 0:
        assert manifest["ok"] is True and manifest["outputs"] == "complete"
        assert manifest["figures"]["nb_jobs_success"] == 3
        assert manifest["processes"]["once"]["ended"] == {"exit": 0, "at_s": 2.0}
        assert "once, started by hand, exited 0 at simulated t=2.0 s" in "".join(lines)
    else:
        assert manifest["ok"] is False
        assert "'once', started by hand, ended (exit code 3)" in manifest["reason"]


def test_a_launched_scheduler_and_a_simulator_that_goes_away(tmp_path, subprocess_env, terminals):
    """A simulator killed in its terminal: the broker notices, ends (exit 1) with a
    manifest, and stops the scheduler it launched."""
    platform = write_platform(tmp_path / "p.xml", 2, 1)
    jobs = [{"id": "1", "subtime": 0, "res": 1, "profile": "endless"}]
    workload = write_workload(tmp_path / "w.json", jobs, PROFILES)
    out = tmp_path / "out"
    broker, lines, reader, port = start_broker(
        terminals, out, subprocess_env, "--scheduler", f"python {POLLER}"
    )
    sim = terminals.start(
        timewarp("sim", "-q", "-p", str(platform), "-w", str(workload), "-e", str(out / "out"),
                 "--enable-compute-sharing", "--enable-dynamic-jobs",
                 "-s", f"tcp://127.0.0.1:{port}", env=subprocess_env)
    )  # fmt: skip
    log = out / "scheduler-0.log"
    wait_for(lambda: log.exists() and "cycle 3:" in log.read_text(), "the 3rd cycle")
    sim.kill()
    assert broker.wait(120) == 1
    reader.join(10)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ok"] is False
    assert "the simulator disconnected before the simulation ended" in manifest["reason"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["-s", "tcp://0.0.0.0:28000", "--expect", "x"], "loopback only"),
        (["-s", "tcp://127.0.0.1:notaport", "--expect", "x"], "expected a port number"),
        ([], "give at least one --scheduler CMD or --expect NAME"),
        (["--expect", "a b"], "--expect 'a b': a name of letters"),
    ],
)
def test_bad_arguments_are_usage_errors(tmp_path, subprocess_env, argv, words):
    proc = timewarp("broker", "-o", str(tmp_path / "out"), *argv, env=subprocess_env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and words in err, err


def test_a_port_in_use_is_said_before_anything_starts(tmp_path, subprocess_env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = timewarp(
            "broker", "-o", str(tmp_path / "out"), "-s", f"tcp://127.0.0.1:{port}",
            "--expect", "x", env=subprocess_env,
        )  # fmt: skip
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "Address already in use" in err, err
    assert not (tmp_path / "out" / "x.env").exists()


def test_the_broker_is_a_listed_command(subprocess_env):
    top = subprocess.run(
        [sys.executable, "-m", "timewarp", "--help"],
        env=subprocess_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "broker" in top.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "broker", "--help"],
        env=subprocess_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0 and "--expect NAME" in proc.stdout, proc.stderr


def test_the_services_of_the_simulators_workload_are_run(tmp_path, subprocess_env, terminals):
    """Issue 27 item 9: with `timewarp sim -w` naming a workload with services, the
    broker never created the Deployment and reported ok. It reads them from the file
    SIMULATION_BEGINS names and runs them as `timewarp simulate` does, same rows."""
    example = ROOT / "examples" / "inputs" / "service_step"
    doc = json.loads((example / "workload.json").read_text())
    doc["services"][0]["traffic"] = {"type": "constant", "rate": 5, "duration": 120}
    doc["services"][0].pop("horizontalPodAutoscaler", None)
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(doc))
    platform = example / "platform.xml"
    scheduler = "python -m sample_schedulers.default_like"
    out = tmp_path / "out"
    broker, lines, reader, port = start_broker(
        terminals, out, subprocess_env, "--scheduler", scheduler
    )
    sim = terminals.start(
        timewarp("sim", "-q", "-p", str(platform), "-w", str(workload), "-e", str(out / "out"),
                 "--enable-compute-sharing", "--enable-dynamic-jobs", "--enable-profile-reuse",
                 "-s", f"tcp://127.0.0.1:{port}", env=subprocess_env)
    )  # fmt: skip
    assert sim.wait(180) == 0, sim.stderr.read()
    assert broker.wait(120) == 0, "".join(lines)
    reader.join(10)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ok"] is True
    assert (
        manifest["figures"]["services"]["web"]["requests"] == 599
    )  # 5/s over 120 s, regular: the 600th would fall at the end
    table = (out / "out_services.csv").read_text()
    alone = tmp_path / "alone"
    proc = subprocess.run(
        [sys.executable, "-m", "timewarp", "simulate", "-q", "--scheduler", scheduler,
         "-p", str(platform), "-w", str(workload), "-o", str(alone)],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert table == (alone / "out_services.csv").read_text()


def test_what_the_broker_cannot_read_is_said_and_bad_services_fail_the_run(tmp_path):
    """The other two outcomes of reading the simulator's workloads: a path the broker
    cannot open (real Batsim names it as given) is a note, not a silent drop; services
    the API would refuse fail the run naming the file and field."""
    import dataclasses
    import io
    from types import SimpleNamespace

    from broker.drivers.engine import Broker, SimulatorInputError
    from simulator.testing import simulation_begins

    hosts = [{"id": 0, "name": "h0", "properties": {"core": "4", "memory": "16Gi"}}]
    begins = simulation_begins(hosts, {})
    data = dataclasses.replace(begins, workloads={"w0": str(tmp_path / "elsewhere.json")})
    log = io.StringIO()
    broker = SimpleNamespace(log=log, services=None, cluster=SimpleNamespace(services=None))
    Broker._adopt_services(broker, data)  # type: ignore[arg-type]
    assert f"workload w0: cannot open {str(tmp_path / 'elsewhere.json')!r}" in log.getvalue()
    assert broker.services is None
    doc = json.loads((ROOT / "examples" / "inputs" / "service_step" / "workload.json").read_text())
    hpa = doc["services"][0]["horizontalPodAutoscaler"]["spec"]
    hpa["metrics"][0]["resource"]["target"]["averageUtilization"] = 0  # the API's rule
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps(doc))
    data = dataclasses.replace(begins, workloads={"w0": str(workload)})
    with pytest.raises(SimulatorInputError) as err:
        Broker._adopt_services(broker, data)  # type: ignore[arg-type]
    assert str(err.value) == (
        f"{workload}: services[0].horizontalPodAutoscaler.spec.metrics[0].resource.target"
        ".averageUtilization: Invalid value: 0: must be greater than 0"
    )


JITTERY = ROOT / "tests" / "programs" / "jittery_binder.py"


def _network_inputs(tmp_path):  # type: ignore[no-untyped-def]
    """Batsim's cluster shape (600 µs per message to the master host) and a burst."""
    sys.path.insert(0, str(ROOT / "tests"))
    from netplatforms import cluster

    from simulator import generators

    platform = tmp_path / "cluster4.xml"
    platform.write_text(cluster(4))
    burst = tmp_path / "burst.json"
    burst.write_text(json.dumps(generators.burst(12, 2.5)))
    return platform, burst


def _simulator_by_hand(terminals, platform, workload, out, port, env):  # type: ignore[no-untyped-def]
    return terminals.start(
        timewarp("sim", "-q", "-p", str(platform), "-w", str(workload), "-e", str(out / "out"),
                 "--enable-compute-sharing", "--enable-dynamic-jobs",
                 "-s", f"tcp://127.0.0.1:{port}", env=env)
    )  # fmt: skip


def test_given_the_platform_the_broker_asks_its_calls_after_the_replys_network_time(
    tmp_path, subprocess_env, terminals
):
    """A scheduler whose timers fall within the 600 µs per message of a reply's events:
    with --platform (the simulator's -p), the broker's calls are accepted."""
    platform, workload = _network_inputs(tmp_path)
    out = tmp_path / "out"
    broker, lines, reader, port = start_broker(
        terminals, out, subprocess_env, "--platform", str(platform),
        "--scheduler", f"python {JITTERY} 1",
    )  # fmt: skip
    sim = _simulator_by_hand(terminals, platform, workload, out, port, subprocess_env)
    assert sim.wait(180) == 0, sim.stderr.read()
    assert broker.wait(120) == 0
    reader.join(10)
    assert "no --platform" not in "".join(lines)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["ok"] is True and manifest["figures"]["nb_jobs_success"] == 12


def test_without_the_platform_the_broker_says_what_it_assumes_and_what_went_wrong(
    tmp_path, subprocess_env, terminals
):
    """Without --platform the broker cannot know the network: it says so at start, warns
    when the first submission arrives late (network time), and when the simulator aborts
    on a call in the past, the run's reason points at --platform."""
    platform, workload = _network_inputs(tmp_path)
    out = tmp_path / "out"
    broker, lines, reader, port = start_broker(
        terminals, out, subprocess_env, "--scheduler", f"python {JITTERY} 1"
    )
    assert any("no --platform: CALL_ME_LATER assumes" in ln for ln in lines)
    sim = _simulator_by_hand(terminals, platform, workload, out, port, subprocess_env)
    _, sim_err = sim.communicate(timeout=180)
    assert sim.returncode != 0 and "You asked to be awaken in the past" in sim_err, sim_err
    assert broker.wait(120) == 1
    reader.join(10)
    text = "".join(lines)
    assert "the simulator's messages take network time" in text, text[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert "the broker was not given --platform" in manifest["reason"]


def test_a_platform_the_broker_cannot_read_is_a_usage_error(tmp_path, subprocess_env):
    proc = timewarp(
        "broker", "-o", str(tmp_path / "out"), "--expect", "x",
        "--platform", str(tmp_path / "missing.xml"), env=subprocess_env,
    )  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--platform" in err and "no such platform file" in err, err
