"""What a pod gives a program (issue 26): the service-account files at their literal
path, the `kubernetes` Service's environment, and the API under its in-cluster names —
for programs written the way their authors write them, run unmodified under
`timewarp simulate --incluster`, twice (`--check-determinism`)."""

from __future__ import annotations

import json
from pathlib import Path

from simrun import ROOT, run_simulate

from broker.facade.kubeconfig import incluster_env

EXAMPLE = ROOT / "examples" / "inputs" / "service_step"
DEFAULT_LIKE = "python -m sample_schedulers.default_like --scheduler-name default-scheduler"


def _service_without_hpa(tmp_path: Path) -> Path:
    workload = json.loads((EXAMPLE / "workload.json").read_text())
    (service,) = workload["services"]
    del service["horizontalPodAutoscaler"]
    service["traffic"]["duration"] = 2400
    path = tmp_path / "web.json"
    path.write_text(json.dumps(workload))
    return path


def test_the_service_link_environment_is_a_pods(tmp_path):
    env = incluster_env("127.0.0.1", 40123, tmp_path)
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == env["KUBERNETES_SERVICE_PORT_HTTPS"] == "40123"
    assert env["KUBERNETES_PORT"] == env["KUBERNETES_PORT_443_TCP"] == "tcp://127.0.0.1:40123"
    assert env["KUBERNETES_PORT_443_TCP_PROTO"] == "tcp"
    assert env["KUBERNETES_PORT_443_TCP_PORT"] == "40123"
    assert env["KUBERNETES_PORT_443_TCP_ADDR"] == "127.0.0.1"


def test_requests_programs_find_their_service_account_and_the_api_by_name(tmp_path, subprocess_env):
    """A time-based scaler (plain `requests`, token and namespace files opened by path,
    KUBERNETES_SERVICE_PORT_HTTPS) and a reporter that talks to
    https://kubernetes.default.svc(.cluster.local:443) with the CA file, beside a binder:
    the scaler's replica changes happen at their simulated instants, the reporter sees
    the cluster, and both runs give the same bytes."""
    # requests lets REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE override a Session's `verify` (a
    # long-standing quirk); this machine sets them, a pod does not
    env = {k: v for k, v in subprocess_env.items() if not k.endswith("CA_BUNDLE")}
    out = tmp_path / "out"
    r = run_simulate(
        out, env, DEFAULT_LIKE, EXAMPLE / "platform.xml", _service_without_hpa(tmp_path),
        "--incluster", "--check-determinism",
        "--scheduler", "python tests/programs/requests_time_scaler.py web",
        "--scheduler", "python tests/programs/svc_dns_watcher.py",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    assert "the two runs wrote the same bytes" in r.stderr
    scaler = (out / "scheduler-1.log").read_text().splitlines()
    assert scaler == [
        "t=600s default/web: 1 -> 3 replicas",
        "t=1800s default/web: 3 -> 1 replicas",
    ]
    reporter = (out / "scheduler-2.log").read_text().splitlines()
    assert reporter[0].startswith("8 nodes, ")
    assert any(line.endswith("3 running") for line in reporter), reporter
    # the scaler's two changes are decisions of its own, at their instants
    import csv

    with open(out / "out_decisions.csv", newline="") as handle:
        scales = [
            (r["time"], r["actor"], r["kind"], r["name"], r["target"], r["detail"])
            for r in csv.DictReader(handle)
            if r["action"] == "scale"
        ]
    assert scales[:2] == [
        ("600", "scheduler-1", "Deployment", "web", "3", "from 1"),
        ("600", "kube-controller-manager", "ReplicaSet", scales[1][3], "3", "from 1"),
    ]
    assert ("1800", "scheduler-1", "Deployment", "web", "1", "from 3") in scales
