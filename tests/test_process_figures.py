"""Where a run's time goes, per process: CPU and API requests by verb and resource, in
the manifest and the summary (commands/process_figures.py, broker/facade/requestinfo.py)."""

from __future__ import annotations

import json

import pytest
from simrun import ROOT, run_simulate

from broker.facade.requestinfo import request_info

EXAMPLES = ROOT / "examples" / "inputs"


@pytest.mark.parametrize(
    ("method", "target", "expected"),
    [
        ("GET", "/api/v1/pods?watch=true&resourceVersion=3", ("watch", "pods")),
        ("GET", "/api/v1/namespaces/default/pods", ("list", "pods")),
        ("GET", "/api/v1/namespaces/default/pods/w0.1", ("get", "pods")),
        ("POST", "/api/v1/namespaces/default/pods/w0.1/binding", ("create", "pods/binding")),
        ("POST", "/api/v1/namespaces/default/bindings", ("create", "bindings")),
        ("PATCH", "/apis/apps/v1/namespaces/d/deployments/web/scale", ("patch", "deployments.apps/scale")),
        ("GET", "/api/v1/namespaces", ("list", "namespaces")),
        ("GET", "/api/v1/namespaces/default", ("get", "namespaces")),
        ("DELETE", "/api/v1/namespaces/d/pods", ("deletecollection", "pods")),
        ("GET", "/apis/metrics.k8s.io/v1beta1/nodes", ("list", "nodes.metrics.k8s.io")),
        ("GET", "/version", ("get", "/version")),
    ],
)  # fmt: skip
def test_requests_are_named_as_kube_apiserver_names_them(method, target, expected):
    assert request_info(method, target) == expected


def test_the_manifest_and_summary_say_what_each_process_asked_and_spent(tmp_path, subprocess_env):
    out = tmp_path / "out"
    r = run_simulate(
        out, subprocess_env, "python -m sample_schedulers.default_like --scheduler-name default",
        EXAMPLES / "cluster16.xml", EXAMPLES / "burst_40_delay170.json", quiet=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    (entry,) = json.loads((out / "manifest.json").read_text())["processes"].values()
    kinds = entry["requests_by_verb_and_resource"]
    assert kinds["create bindings"] == 40  # one per pod
    assert kinds["list nodes"] >= 1 and kinds["watch pods"] >= 1
    assert entry["requests"] == sum(kinds.values())
    assert entry["user_cpu_s"] > 0 and entry["system_cpu_s"] >= 0
    assert f"scheduler-0: cpu {entry['user_cpu_s'] + entry['system_cpu_s']:.2f} s, " in r.stderr
    assert "API requests (create bindings 40" in r.stderr
