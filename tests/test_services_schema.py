"""Services with traffic (timewarp's workload extension): the fixed example loads, and a
bad service definition is refused before anything runs, naming the file and the field."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

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
        "services[0].traffic.steps[1]: expected [seconds in [0, 3.16224e+07], rate in [0, 1e+09]]",
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
    (f"{S}.metrics.tick", 0, "services[0].metrics.tick: expected a number >= 0.001"),
    # every rate and interval is bounded (issue 27 item 5: a tick of 1e-6 s ran away)
    (f"{S}.metrics.tick", 1e-6, "services[0].metrics.tick: expected a number >= 0.001, got 1e-06"),
    (f"{S}.metrics.tick", 1e6, "services[0].metrics.tick: 1e+06 is over the limit of 86400"),
    (
        f"{S}.metrics.tick",
        0.01,
        "services[0].metrics.tick: 0.01 s over a 3000 s service makes 3e+05 ticks (rows of "
        "out_services.csv), over the limit of 200,000: a tick of at least 0.015 s",
    ),
    (f"{S}.metrics.lag", 1e300, "services[0].metrics.lag: 1e+300 is over the limit of 3.16224e+07"),
    (f"{S}.traffic.duration", 1e12, "services[0].traffic.duration: 1e+12 is over the limit"),
    (f"{S}.startup_delay", 1e300, "services[0].startup_delay: 1e+300 is over the limit"),
    (f"{S}.readiness_delay", 1e10, "services[0].readiness_delay: 1e+10 is over the limit"),
    (f"{S}.request.timeout", 1e10, "services[0].request.timeout: 1e+10 is over the limit"),
    (f"{S}.request.cost.mean", 1e10, "services[0].request.cost.mean: 1e+10 is over the limit"),
    (
        f"{S}.traffic",
        {"type": "constant", "rate": 1e12, "duration": 60},
        "services[0].traffic.rate: 1e+12 is over the limit of 1e+09",
    ),
    (
        f"{S}.traffic",
        {"type": "sinusoid", "mean": 5, "amplitude": 1, "period": 1e-3, "duration": 60},
        "services[0].traffic.period: expected a number >= 10, got 0.001",
    ),
    (
        f"{S}.traffic.steps",
        [[0, 20], [1e15, 5]],
        "services[0].traffic.steps[1]: expected [seconds in [0, 3.16224e+07]",
    ),
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


def test_the_exact_model_is_refused_past_its_limit_and_auto_turns_fluid(tmp_path) -> None:
    doc = example()
    doc["services"][0]["traffic"]["steps"] = [[0, 24_000]]  # 7.2e7 requests in 3,000 s
    file = tmp_path / "w.json"
    file.write_text(json.dumps(doc))
    assert load_workload(file, "w0", 8).services[0].traffic.model == "fluid"
    doc["services"][0]["model"] = "exact"
    file.write_text(json.dumps(doc))
    with pytest.raises(WorkloadError) as err:
        load_workload(file, "w0", 8)
    assert str(err.value) == (
        f"{file}: services[0].model: 'exact' would serve 7.2e+07 requests one by one, over "
        "the limit of 50,000,000: use 'fluid' or 'auto'"
    )


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


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("request", "timeout", -1, "services[0].request.timeout: expected a number > 0, got -1"),
        # issue 27 item 5: this tick ran away in memory and time without a word
        ("metrics", "tick", 1e-6, "services[0].metrics.tick: expected a number >= 0.001"),
    ],
)
def test_simulate_refuses_a_bad_service_with_exit_2_before_starting(
    tmp_path, subprocess_env, section, key, value, message
) -> None:
    doc = example()
    doc["services"][0].setdefault(section, {})[key] = value
    file = tmp_path / "w.json"
    file.write_text(json.dumps(doc))
    out = tmp_path / "out"
    proc = run_simulate(
        out, subprocess_env, "python -c pass", EXAMPLE / "platform.xml", file, quiet=False
    )
    assert proc.returncode == 2, proc.stderr
    assert f"{file}: {message}" in proc.stderr
    assert not out.exists() or not any(out.iterdir())


# Issue 27 items 10 and 11: every workload object is checked with the API's own rules
# (an invalid HPA was "internal error … a bug in timewarp", exit 1), and a template that
# fits no node is refused up front (it ran with 100 % failed requests, without a word)
API_REFUSED = [
    (
        ("horizontalPodAutoscaler", "spec"),
        {"minReplicas": 0},  # the issue's: "internal error … a bug in timewarp", exit 1
        "services[0].horizontalPodAutoscaler.spec.minReplicas: Invalid value: 0: must be "
        "greater than or equal to 1",
    ),
    (
        ("horizontalPodAutoscaler", "spec"),
        {"maxReplicas": 0},
        "services[0].horizontalPodAutoscaler.spec.maxReplicas: Invalid value: 0: must be "
        "greater than 0",
    ),
    (
        ("horizontalPodAutoscaler", "spec", "metrics", 0, "resource", "target"),
        {"averageUtilization": 0},
        "services[0].horizontalPodAutoscaler.spec.metrics[0].resource.target"
        ".averageUtilization: Invalid value: 0: must be greater than 0",
    ),
    (
        ("horizontalPodAutoscaler", "spec"),
        {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 4000}}},
        "services[0].horizontalPodAutoscaler.spec.behavior.scaleDown"
        ".stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
    ),
    (
        ("deployment", "spec"),
        {"strategy": {"type": "Bogus"}},
        'services[0].deployment.spec.strategy.type: Unsupported value: "Bogus": supported '
        'values: "Recreate", "RollingUpdate"',
    ),
    (
        ("deployment", "spec", "template", "spec", "containers", 0),
        {"image": ""},
        "services[0].deployment.spec.template.spec.containers[0].image: Required value",
    ),
    (
        ("deployment", "spec", "template", "spec", "containers", 0, "resources"),
        {"requests": {"cpu": "64"}, "limits": {"cpu": "64"}},
        "services[0].deployment.spec.template.spec.containers: requests.cpu: can never run: "
        "it requests 64 cpu and the largest node allocatable is 4 (every request of the "
        "service would fail)",
    ),
]


def _with(keys: tuple, update: dict) -> dict:
    doc = example()
    node = doc["services"][0]
    for key in keys:
        node = node[key]
    node.update(copy.deepcopy(update))
    return doc


@pytest.mark.parametrize(
    ("keys", "update", "message"), API_REFUSED, ids=[str(k[-1]) for k, _u, _m in API_REFUSED]
)
def test_every_service_object_is_checked_as_the_api_would(tmp_path, keys, update, message):
    from broker.cluster.input_check import InputError, check_inputs
    from simulator.platform import load_platform

    file = tmp_path / "w.json"
    file.write_text(json.dumps(_with(keys, update)))
    workload = load_workload(file, "w0", 8)  # the schema lets these through: the API won't
    with pytest.raises(InputError) as err:
        check_inputs(load_platform(EXAMPLE / "platform.xml"), [workload])
    assert str(err.value) == f"{file}: {message}"


@pytest.mark.parametrize("case", [0, 2, 6], ids=["min-replicas", "utilisation", "never-fits"])
def test_simulate_refuses_what_the_api_would_with_exit_2(tmp_path, subprocess_env, case):
    keys, update, message = API_REFUSED[case]
    file = tmp_path / "w.json"
    file.write_text(json.dumps(_with(keys, update)))
    out = tmp_path / "out"
    proc = run_simulate(
        out, subprocess_env, "python -c pass", EXAMPLE / "platform.xml", file, quiet=False
    )
    assert proc.returncode == 2, proc.stderr
    assert f"timewarp simulate: {file}: {message}" in proc.stderr
    assert "internal error" not in proc.stderr


def _replay_workload(tmp_path, file: str) -> Path:
    doc = example()
    doc["services"][0]["traffic"] = {"type": "replay", "file": file, "duration": 100}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"time,rate\n0,5\n30,\xe9\n", "rates.csv: not UTF-8 text (byte 0xe9 at offset 17)"),
        (
            b'time,rate\n0,5\n30,"' + b"9" * ((128 << 10) + 1) + b'"\n',
            "rates.csv: line 3: field larger than field limit (131072)",
        ),
        (None, "rates.csv: not a regular file"),  # a FIFO: the read hung
    ],
    ids=["latin-1", "huge-field", "fifo"],
)
def test_a_replay_file_that_cannot_be_read_is_named(tmp_path, content, message) -> None:
    """Issue 27 item 12: tracebacks (UnicodeDecodeError, csv.Error) or a silent hang."""
    rates = tmp_path / "rates.csv"
    if content is None:
        os.mkfifo(rates)
    else:
        rates.write_bytes(content)
    file = _replay_workload(tmp_path, "rates.csv")
    with pytest.raises(WorkloadError) as err:
        load_workload(file, "w0", 8)
    assert str(err.value) == f"{file}: services[0].traffic.file: {tmp_path}/{message}"


def test_a_replay_file_is_read_up_to_a_limit(tmp_path, monkeypatch) -> None:
    """/dev/zero as a replay filled 3.9 GB before a MemoryError: it is not a regular
    file; and a regular file is read up to MAX_REPLAY_BYTES (16 MiB)."""
    import simulator.traffic.spec as services

    file = _replay_workload(tmp_path, "/dev/zero")
    with pytest.raises(WorkloadError, match=r"traffic.file: /dev/zero: not a regular file"):
        load_workload(file, "w0", 8)
    assert services.MAX_REPLAY_BYTES == 16 << 20
    monkeypatch.setattr(services, "MAX_REPLAY_BYTES", 20)
    (tmp_path / "rates.csv").write_text("time,rate\n0,5\n30,50\n60,0\n")  # 28 bytes
    file = _replay_workload(tmp_path, "rates.csv")
    with pytest.raises(WorkloadError, match=r"rates.csv: larger than the limit of 20 bytes"):
        load_workload(file, "w0", 8)
