"""Observers never change the run (issue 25 item 3): the people's kubeconfig (HTTPS, the
run's CA, the observer's token) is read-only, never charged, never ordered; a request is
charged to the simulated process whose runtime sent it, not to the token it carries."""

from __future__ import annotations

import http.client
import json
import os
import select
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import yaml
from simrun import OUT_CSVS, ROOT

from broker.facade import Facade, ManualClock
from broker.facade.endpoint import Endpoint
from broker.facade.objects import make_node
from simulator.testing import write_platform, write_workload

POD = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def _facade(tmp_path: Path) -> Facade:
    endpoint = Endpoint()
    endpoint.enable_https()
    facade = Facade(ManualClock(), endpoint=endpoint)
    facade.store.create("nodes", make_node("n1"))
    facade.write_observer_kubeconfig(tmp_path / "observer.kubeconfig")
    return facade


class Observer:
    """An HTTPS client with the observer kubeconfig's server, CA and token."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.token = config["users"][0]["user"]["token"]
        host, port = cluster["server"].removeprefix("https://").split(":")
        assert cluster["server"].startswith("https://")
        self.ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.host, self.port = host, int(port)

    def connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)

    def call(self, method: str, path: str, body: object = None, headers: dict | None = None):
        conn = self.connect()
        try:
            data = None if body is None else json.dumps(body).encode()
            hdrs = {"Authorization": f"Bearer {self.token}", **(headers or {})}
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"null")
        finally:
            conn.close()


def test_the_observer_reads_over_https_and_may_not_write(tmp_path):
    with _facade(tmp_path) as facade:
        observer = Observer(tmp_path / "observer.kubeconfig")
        status, nodes = observer.call("GET", "/api/v1/nodes")
        assert status == 200 and [n["metadata"]["name"] for n in nodes["items"]] == ["n1"]
        status, body = observer.call("POST", "/api/v1/namespaces/default/pods", POD)
        assert status == 403
        assert body["reason"] == "Forbidden" and body["code"] == 403 and body["kind"] == "Status"
        assert body["message"] == (
            'pods is forbidden: User "timewarp:observer" cannot create resource "pods" '
            'in API group "" in the namespace "default"'
        )
        status, body = observer.call("DELETE", "/apis/apps/v1/namespaces/ns/deployments/web")
        assert status == 403 and body["details"] == {
            "name": "web",
            "group": "apps",
            "kind": "deployments",
        }
        assert facade.store.get_or_none("pods", "default", "p") is None
        # the schedulers' plain HTTP is still served on the same port
        sched = facade.add_token("sched")
        conn = http.client.HTTPConnection(facade.host, facade.port, timeout=30)
        conn.request("POST", "/api/v1/namespaces/default/pods", body=json.dumps(POD),
                     headers={"Authorization": f"Bearer {sched}"})  # fmt: skip
        assert conn.getresponse().status == 201
        conn.close()
        # nothing was counted for any scheduler token
        assert facade.token_stats("sched").requests == 1


def _request(facade: Facade, token: str, seq: str | None):
    from broker.facade.server import Request

    headers = {"authorization": f"Bearer {token}"}
    if seq is not None:
        headers["x-timewarp-seq"] = seq
    return Request("GET", "/api/v1/pods", headers, b"", 1, lambda: None)


def test_requests_are_charged_to_the_runtime_that_sent_them_not_to_the_token(tmp_path):
    with _facade(tmp_path) as facade:
        token = facade.add_token("scheduler-0")
        observer = facade.tokens.observer_token()
        # a facade on its own: the token names its process, the observer is outside
        assert facade.charged_process(_request(facade, token, None)) == "scheduler-0"
        assert facade.charged_process(_request(facade, observer, None)) is None
        pids = {4242: "scheduler-0", 5151: "loadgen"}
        facade.attribute_by_pid(pids.get)
        # kubectl with the scheduler's kubeconfig (no runtime): charged to nobody
        assert facade.charged_process(_request(facade, token, None)) is None
        # another simulated process using the scheduler's token: charged to itself
        assert facade.charged_process(_request(facade, token, "5151-ab.1")) == "loadgen"
        assert facade.charged_process(_request(facade, token, "4242-ab.7")) == "scheduler-0"
        # a process the clock does not know: outside
        assert facade.charged_process(_request(facade, token, "999-ab.1")) is None
        # a simulated process that loads the observer's kubeconfig acts as itself
        r = _request(facade, observer, "4242-cd.1")
        assert facade.charged_process(r) == "scheduler-0"
        assert not facade.api.authenticate(r).read_only


def test_per_process_request_figures_count_the_runtime_that_sent_them(tmp_path):
    with _facade(tmp_path) as facade:
        token = facade.add_token("scheduler-0")
        observer = facade.tokens.observer_token()
        facade.attribute_by_pid({4242: "scheduler-0", 5151: "loadgen"}.get)
        for who, seq in [
            (token, None),  # kubectl with the scheduler's kubeconfig: outside
            (observer, None),  # the people's kubeconfig: outside
            (token, "999-ab.1"),  # a runtime the clock does not know: outside
            (token, "5151-ab.1"),  # another simulated process with the scheduler's token
            (observer, "4242-cd.1"),  # the scheduler with the observer's kubeconfig
            (token, "4242-ab.1"),
        ]:
            assert facade.api.handle(_request(facade, who, seq)).status == 200
        assert facade.api.request_counts == {
            ("loadgen", "list", "pods"): 1,
            ("scheduler-0", "list", "pods"): 2,
        }


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    platform = write_platform(tmp_path / "p.xml", 4, cores=2)
    profile = {"type": "delay", "delay": 30, "cpu": "1", "scheduler": "default"}
    jobs = [{"id": str(i), "subtime": 10 * i, "res": 1, "profile": "d"} for i in range(24)]
    return platform, write_workload(tmp_path / "w.json", jobs, {"d": profile})


def _start(tmp_path: Path, env: dict, name: str) -> tuple[subprocess.Popen, Path]:
    """A run whose scheduler starts once ``GO`` exists (the run waits for it in virtual
    time: the clock expects it). A low --poll-threshold: any observer request charged to
    the scheduler would delay it, and the outputs would show it."""
    platform, workload = _inputs(tmp_path)
    go = tmp_path / f"{name}.go"
    scheduler = (
        f"sh -c 'while [ ! -e {go} ]; do sleep 0.02; done; "
        f"exec {sys.executable} -m sample_schedulers.default_like --scheduler-name default'"
    )
    out = tmp_path / name
    proc = subprocess.Popen(
        [sys.executable, "-m", "timewarp", "simulate", "--no-plots", "--poll-threshold", "3",
         "--scheduler", scheduler, "-p", str(platform), "-w", str(workload), "-o", str(out)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return proc, go


def _kubeconfig_line(proc: subprocess.Popen, bound_s: float = 120.0) -> list[str]:
    """stderr lines up to the one naming the observer kubeconfig (bounded in time)."""
    lines: list[str] = []
    while True:
        ready, _, _ = select.select([proc.stderr], [], [], bound_s)
        assert ready, f"no kubectl line within {bound_s} s: {lines}"
        line = proc.stderr.readline()
        assert line, f"the run ended before its kubectl line: {lines}"
        lines.append(line)
        if "look inside: KUBECONFIG=" in line:
            return lines


def _outputs(out: Path) -> dict[str, bytes]:
    return {n: (out / n).read_bytes() for n in (*OUT_CSVS, "scheduler-0.log")}


OBSERVERS = 200


def test_two_hundred_observers_leave_the_run_byte_identical(tmp_path, subprocess_env):
    base, go = _start(tmp_path, subprocess_env, "base")
    go.touch()
    _, err = base.communicate(timeout=300)
    assert base.returncode == 0, err[-3000:]
    # every run writes the people's kubeconfig and names it in the summary and manifest
    line = f"KUBECONFIG={tmp_path / 'base' / 'observer.kubeconfig'} kubectl get pods"
    assert (tmp_path / "base" / "observer.kubeconfig").is_file()
    assert f"kubectl (while a run goes on): {line}\n" in err
    manifest = json.loads((tmp_path / "base" / "manifest.json").read_text())
    assert manifest["figures"]["kubectl"] == line

    loaded, go = _start(tmp_path, subprocess_env, "loaded")
    _kubeconfig_line(loaded)
    observer = Observer(tmp_path / "loaded" / "observer.kubeconfig")
    stop = threading.Event()
    started = threading.Semaphore(0)
    served = [0] * OBSERVERS
    refused: list[str] = []

    def watch(conn: http.client.HTTPSConnection) -> None:
        conn.request("GET", "/api/v1/pods?watch=1&timeoutSeconds=1",
                     headers={"Authorization": f"Bearer {observer.token}"})  # fmt: skip
        resp = conn.getresponse()
        assert resp.status == 200
        resp.read()  # until the (wall-clock) timeout ends the stream

    def work(i: int) -> None:
        paths = ("/api/v1/pods", "/api/v1/nodes", "/api/v1/namespaces/default", None)
        first = True
        try:
            conn = observer.connect()
            while not stop.is_set():
                path = paths[(i + served[i]) % len(paths)]
                if path is None:
                    watch(conn)
                else:
                    conn.request("GET", path, headers={"Authorization": f"Bearer {observer.token}"})
                    resp = conn.getresponse()
                    resp.read()
                    if resp.status != 200:
                        refused.append(f"{path}: {resp.status}")
                served[i] += 1
                if first:
                    started.release()
                    first = False
        except (OSError, http.client.HTTPException):
            pass  # the run ended and its facade with it
        finally:
            if first:
                started.release()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(OBSERVERS)]
    for t in threads:
        t.start()
    for _ in threads:  # every observer is in before the scheduler starts
        assert started.acquire(timeout=120)
    before = sum(served)
    go.touch()
    _, err = loaded.communicate(timeout=300)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert loaded.returncode == 0, err[-3000:]
    assert not refused, refused[:5]
    assert before >= OBSERVERS  # each had been served before the scheduler began
    assert sum(served) > before  # and they went on while it ran
    assert _outputs(tmp_path / "loaded") == _outputs(tmp_path / "base")
    assert "busy polling" not in err
    assert not any(t.is_alive() for t in threads)
    assert os.path.getsize(tmp_path / "loaded" / "out_jobs.csv") > 0


def test_a_request_asks_the_clock_who_sent_it_once(tmp_path):
    """The head's check attributes a request to its process only for the observer's
    credential (which a simulated process sheds, so it may write); any other credential's
    process is looked up once, by the request itself — a look-up under the clock's lock."""
    with _facade(tmp_path) as facade:
        token = facade.add_token("scheduler-0")
        observer = facade.tokens.observer_token()
        asked: list[int] = []

        def process_of_pid(pid: int) -> str | None:
            asked.append(pid)
            return {4242: "scheduler-0", 5151: "loadgen"}.get(pid)

        facade.attribute_by_pid(process_of_pid)
        target = "/api/v1/namespaces/default/pods"
        for who, seq, process in [
            (token, "4242-ab.1", "scheduler-0"),
            (token, "5151-ab.1", "loadgen"),
            (token, "999-ab.1", None),
        ]:
            r = _request(facade, who, seq)
            assert facade.api.admit_head("POST", target, r.headers) is None
            assert facade.charged_process(r) == process
            assert len(asked) == 1, (who, seq)
            asked.clear()
        # the observer: a simulated process's request may write, the head knows it
        r = _request(facade, observer, "4242-cd.1")
        assert facade.api.admit_head("POST", target, r.headers) is None
        outside = _request(facade, observer, "999-cd.1")
        assert facade.api.admit_head("POST", target, outside.headers).status == 403
