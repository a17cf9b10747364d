"""Services with traffic (timewarp's workload extension): the fixed example loads, and a
bad service definition is refused before anything runs, naming the file and the field."""

from __future__ import annotations

import copy
import json

import pytest
from simrun import ROOT, run_simulate

from simulator.traffic import patterns
from simulator.traffic.spec import AUTO_EXACT_LIMIT
from simulator.workload import WorkloadError, load_workload

EXAMPLE = ROOT / "examples" / "inputs" / "service_step"


def example() -> dict:
    return json.loads((EXAMPLE / "workload.json").read_text())


def test_the_fixed_example_is_what_the_issue_says() -> None:
    w = load_workload(EXAMPLE / "workload.json", "w0", 8)
    assert w.jobs == [] and len(w.services) == 1
    s = w.services[0]
    assert (s.name, s.namespace, s.selector) == ("web", "default", {"app": "web"})
    dep = s.deployment
    assert dep["metadata"]["name"] == "web" and dep["spec"]["replicas"] == 1
    pod = dep["spec"]["template"]["spec"]
    assert pod["schedulerName"] == "default-scheduler"
    res = pod["containers"][0]["resources"]
    assert res["requests"] == res["limits"] == {"cpu": "1", "memory": "512Mi"}
    assert s.startup_delay == 10
    t = s.traffic
    assert [t.pattern.rate(x) for x in (0, 599, 600, 1799, 1800, 2999)] == [
        20,
        20,
        200,
        200,
        20,
        20,
    ]
    assert t.duration == 3000 and t.timeout == 10
    assert (t.cost.distribution, t.cost.mean) == ("exponential", 0.05)
    assert patterns.expected_requests(t.pattern, t.duration) == 276_000
    assert t.model == "exact"  # well under AUTO_EXACT_LIMIT
    assert 276_000 < AUTO_EXACT_LIMIT
    platform = (EXAMPLE / "platform.xml").read_text()
    assert platform.count('<prop id="core" value="4"/>') == 8
    assert platform.count('<prop id="memory" value="16Gi"/>') == 8


def _set(doc: dict, path: str, value) -> None:
    keys = path.split(".")
    node = doc
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    last = keys[-1]
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


_DELETE = object()
S = "services.0"
BAD = [
    (f"{S}.name", "Web_1", "services[0].name: expected a DNS label"),
    (f"{S}.traffic", _DELETE, "services[0].traffic: missing"),
    (f"{S}.traffic.type", "burst", "services[0].traffic.type: expected one of"),
    (f"{S}.traffic.duration", 0, "services[0].traffic.duration: expected a number > 0"),
    (
        f"{S}.traffic.steps",
        [[0, 20], [600, -1]],
        "services[0].traffic.steps[1]: expected [seconds >= 0, rate >= 0]",
    ),
    (
        f"{S}.traffic.steps",
        [[5, 20]],
        "services[0].traffic.steps[0]: the first step must be at 0 s",
    ),
    (
        f"{S}.traffic.steps",
        [[0, 20], [600, 5], [300, 1]],
        "services[0].traffic.steps[2]: times must increase",
    ),
    (
        f"{S}.traffic.arrivals",
        "bursty",
        "services[0].traffic.arrivals: expected 'regular' or 'poisson'",
    ),
    (f"{S}.traffic.rate", 3, "services[0].traffic: unknown key(s) ['rate']"),
    (
        f"{S}.request.cost.distribution",
        "pareto",
        "services[0].request.cost.distribution: expected one of",
    ),
    (f"{S}.request.cost.mean", -0.05, "services[0].request.cost.mean: expected a number > 0"),
    (f"{S}.request.timeout", "10s", "services[0].request.timeout: expected a number > 0"),
    (f"{S}.metrics.pipeline", "prometheus", "services[0].metrics.pipeline: expected one of"),
    (f"{S}.metrics.tick", 0, "services[0].metrics.tick: expected a number > 0"),
    (f"{S}.model", "magic", "services[0].model: expected one of"),
    (f"{S}.startup_delay", -1, "services[0].startup_delay: expected a number >= 0"),
    (
        f"{S}.deployment.spec.replicas",
        -2,
        "services[0].deployment.spec.replicas: expected an integer >= 0",
    ),
    (
        f"{S}.deployment.spec.selector",
        {"matchLabels": {}},
        "services[0].deployment.spec.selector: expected {matchLabels",
    ),
    (
        f"{S}.deployment.spec.template.metadata.labels",
        {"app": "api"},
        "services[0].deployment.spec.template.metadata.labels: must match spec.selector.matchLabels",
    ),
    (
        f"{S}.deployment.spec.template.spec.containers.0.resources",
        {},
        "services[0].deployment.spec.template.spec.containers: no container has a cpu request or limit",
    ),
    (
        f"{S}.deployment.spec.template.spec.containers.0.resources.limits.cpu",
        "one",
        "containers[0].resources.limits.cpu: not a quantity",
    ),
    (f"{S}.deployment.kind", "StatefulSet", "services[0].deployment.kind: expected 'Deployment'"),
    (
        f"{S}.horizontalPodAutoscaler.spec.scaleTargetRef.name",
        "api",
        "services[0].horizontalPodAutoscaler.spec.scaleTargetRef.name: expected 'web'",
    ),
    (
        f"{S}.horizontalPodAutoscaler.spec.maxReplicas",
        0,
        "services[0].horizontalPodAutoscaler.spec.maxReplicas: expected an integer >= 1",
    ),
    (f"{S}.colour", "blue", "services[0]: unknown key(s) ['colour']"),
]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    BAD,
    ids=[b[0].split(".", 2)[-1] + "=" + repr(b[1])[:20] for b in BAD],
)
def test_a_bad_service_is_refused_naming_file_and_field(tmp_path, path, value, message) -> None:
    doc = example()
    _set(doc, path, value if value is _DELETE else copy.deepcopy(value))
    file = tmp_path / "w.json"
    file.write_text(json.dumps(doc))
    with pytest.raises(WorkloadError) as err:
        load_workload(file, "w0", 8)
    assert str(err.value).startswith(f"{file}: ")
    assert message in str(err.value)


def test_two_services_on_one_deployment_are_refused(tmp_path) -> None:
    doc = example()
    second = copy.deepcopy(doc["services"][0])
    second["name"] = "web2"
    doc["services"].append(second)
    file = tmp_path / "w.json"
    file.write_text(json.dumps(doc))
    with pytest.raises(
        WorkloadError,
        match=r"services\[1\].deployment.metadata.name: Deployment default/web already serves services\[0\]",
    ):
        load_workload(file, "w0", 8)


def test_a_replayed_series_is_read_and_checked(tmp_path) -> None:
    doc = example()
    doc["services"][0]["traffic"] = {"type": "replay", "file": "rates.csv", "duration": 100}
    file = tmp_path / "w.json"
    file.write_text(json.dumps(doc))
    (tmp_path / "rates.csv").write_text("time,rate\n0,5\n30,50\n60,0\n")
    t = load_workload(file, "w0", 8).services[0].traffic
    assert [t.pattern.rate(x) for x in (0, 29, 30, 59, 60, 99)] == [5, 5, 50, 50, 0, 0]
    (tmp_path / "rates.csv").write_text("time,rate\n0,5\n30,x\n")
    with pytest.raises(
        WorkloadError,
        match=r"services\[0\].traffic.file: .*rates.csv: line 3: expected two numbers",
    ):
        load_workload(file, "w0", 8)
    (tmp_path / "rates.csv").write_text("t,r\n0,5\n")
    with pytest.raises(WorkloadError, match=r"line 1: expected the header 'time,rate'"):
        load_workload(file, "w0", 8)
    (tmp_path / "rates.csv").unlink()
    with pytest.raises(WorkloadError, match=r"services\[0\].traffic.file: cannot read"):
        load_workload(file, "w0", 8)


def test_simulate_refuses_a_bad_service_with_exit_2_before_starting(
    tmp_path, subprocess_env
) -> None:
    doc = example()
    doc["services"][0]["request"]["timeout"] = -1
    file = tmp_path / "w.json"
    file.write_text(json.dumps(doc))
    out = tmp_path / "out"
    proc = run_simulate(
        out, subprocess_env, "python -c pass", EXAMPLE / "platform.xml", file, quiet=False
    )
    assert proc.returncode == 2, proc.stderr
    assert f"{file}: services[0].request.timeout: expected a number > 0, got -1" in proc.stderr
    assert not out.exists() or not any(out.iterdir())
