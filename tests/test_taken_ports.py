"""An address that is taken is the user's to change, said as such: every command that
listens where it is told, or connects where it is told, names the address and what to
do, with the usage exit status (2), never "a bug in timewarp" nor a traceback.

(`timewarp simulate` and `timewarp sweep` listen on ports the system picks free: nothing
to take.)"""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from simulator.testing import write_platform, write_workload

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def taken():
    """A port another program listens on (it accepts, answers like a web server)."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    server.close()


def _timewarp(*argv: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "timewarp", *argv],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_the_broker_names_a_taken_address_and_what_to_do(tmp_path, subprocess_env, taken):
    r = _timewarp(
        "broker", "-o", str(tmp_path / "out"), "-s", f"tcp://127.0.0.1:{taken}",
        "--scheduler", "python -c 'print(1)'", env=subprocess_env,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert f"-s tcp://127.0.0.1:{taken}: Address already in use" in r.stderr
    assert "give another port (PORT 0 picks a free one)" in r.stderr
    assert "Traceback" not in r.stderr and "bug in timewarp" not in r.stderr
    assert not (tmp_path / "out" / "scheduler-0.log").exists()  # nothing started


def test_the_brokers_address_is_its_own_from_the_checks_on(tmp_path, monkeypatch):
    """A port found free by a check and bound later could be taken in between (another
    test's server got it, in a loaded suite): the broker then failed with a ZMQError, "a
    bug in timewarp". It binds once, before the run starts: a program that tries the
    port once the checks are done finds it taken."""
    import commands.broker as broker_command
    from commands.parsing import CommandParser

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    competitor: list[str] = []

    def started(self) -> int:  # the run, once the command's checks passed
        with socket.socket() as other:
            try:
                other.bind(("127.0.0.1", port))
                competitor.append("bound it")
            except OSError as exc:
                competitor.append(errno.errorcode[exc.errno])
        self._take_down(self._parts or broker_command.Wiring(), None)
        return 0

    monkeypatch.setattr(broker_command._BrokerRun, "run", started)
    parser = CommandParser(prog="timewarp broker")
    broker_command.add_arguments(parser)
    args = parser.parse_args(
        ["-o", str(tmp_path / "out"), "-s", f"tcp://127.0.0.1:{port}", "--expect", "x"]
    )
    assert broker_command.run(args) == 0
    assert competitor == ["EADDRINUSE"]


def test_the_simulator_says_what_listens_at_its_endpoint_is_no_decision_process(
    tmp_path, subprocess_env, taken
):
    """Batsim (and `timewarp sim` before) retried for ever, silently, against a port
    another program holds."""
    platform = write_platform(tmp_path / "p.xml", 2, 1)
    profiles = {"s": {"type": "delay", "delay": 10}}
    workload = write_workload(tmp_path / "w.json", [{"id": "1", "subtime": 0, "res": 1,
                                                      "profile": "s"}], profiles)  # fmt: skip
    r = _timewarp(
        "sim", "-p", str(platform), "-w", str(workload), "-e", str(tmp_path / "out"),
        "-s", f"tcp://127.0.0.1:{taken}", env=subprocess_env,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert f"-s tcp://127.0.0.1:{taken}: the program listening there is not a Batsim" in r.stderr
    assert "HTTP/1.1 400" in r.stderr  # what it said instead
    assert not list(tmp_path.glob("out*"))  # no outputs, as for any usage error


def test_a_standalone_runs_clock_address_that_is_taken_is_named(tmp_path, subprocess_env, taken):
    prog = tmp_path / "prog.py"
    prog.write_text("import time\ntime.sleep(1)\nprint('ran')\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**subprocess_env, "TMPDIR": str(scratch),
           "TIMEWARP_STANDALONE_ENDPOINT": f"tcp://127.0.0.1:{taken}"}  # fmt: skip
    r = _timewarp("run", "--standalone", "-q", "--", "python", str(prog), env=env)
    assert r.returncode == 2, r.stderr
    assert (
        f"TIMEWARP_STANDALONE_ENDPOINT=tcp://127.0.0.1:{taken}: Address already in use" in r.stderr
    )
    assert "Traceback" not in r.stderr and "ran" not in r.stdout
    assert list(scratch.iterdir()) == []  # its private folder removed
    env["TIMEWARP_STANDALONE_ENDPOINT"] = "tcp://127.0.0.1:0"  # a free one, picked
    r = _timewarp("run", "--standalone", "-q", "--", "python", str(prog), env=env)
    assert r.returncode == 0 and r.stdout == "ran\n", r.stderr


@pytest.mark.parametrize("tls", [False, True])
def test_a_facade_given_a_taken_port_names_it(tmp_path, monkeypatch, taken, tls):
    import tempfile

    from broker.facade import Facade, ManualClock

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(OSError) as err:
        Facade(ManualClock(), port=taken, tls=tls)
    assert err.value.errno == errno.EADDRINUSE
    assert f"the API facade's address 127.0.0.1:{taken}: Address already in use" in str(err.value)
    assert list(tmp_path.iterdir()) == []  # no TLS files left
