"""The scale subresource and autoscaling/v2 HorizontalPodAutoscalers: served like the real
API server's, round-tripping through both client generations' typed models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker.facade import Facade, ManualClock
from broker.facade.errors import ApiError
from broker.facade.kinds.apps import scaled_value
from broker.facade.selectors import format_selector

ROOT = Path(__file__).resolve().parent.parent
OLD_CLIENT = ROOT / ".venv" / "k8s24"
PROGRAM = ROOT / "tests" / "programs" / "autoscaling_api_client.py"


@pytest.fixture
def facade():
    f = Facade(ManualClock()).start()
    yield f
    f.stop()


@pytest.mark.parametrize("version", ["newest", "24"])
def test_scale_and_hpa_through_both_client_generations(facade, tmp_path, subprocess_env, version):
    env = dict(subprocess_env)
    if version == "24":
        if not (OLD_CLIENT / "kubernetes").is_dir():
            pytest.skip("run scripts/setup-venv.sh: .venv/k8s24 missing")
        env["PYTHONPATH"] = os.pathsep.join([str(OLD_CLIENT), str(ROOT)])
    kubeconfig = facade.write_kubeconfig(tmp_path / "kc", "autoscaler")
    proc = subprocess.run(
        [sys.executable, str(PROGRAM), str(kubeconfig)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["version"].startswith("24.") == (version == "24")
    assert seen["read"] == [1, 0, "app=web"]
    assert seen["patched"] == 4 and seen["generation"] == 2
    assert seen["replaced"] == 3
    code, message = seen["stale"]
    assert code == 409 and "the object has been modified" in message
    assert seen["negative"] == [
        422,
        'Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be '
        "greater than or equal to 0",
    ]
    assert seen["missing"] == [404, 'deployments.apps "nope" not found']
    assert seen["deployment_replicas"] == 3
    # spec.replicas 0 is omitted (omitempty), the selector is the server's string form
    assert seen["rs_scale"] == [None, "app=cache,tier in (a,b)"]
    assert seen["hpa_defaults"] == {
        "scale_up_policies": [["Pods", 4, 15], ["Percent", 100, 15]],
        "scale_up_window": 0,
        "scale_down_window": 120,
        "scale_down_select": "Max",
        "desired": 0,
    }
    assert seen["bare"] == [1, "Resource", "cpu", 80, None]
    assert seen["status"] == [5, "450m", "SucceededRescale"]
    assert seen["after_writes"] == [12, 6]
    assert seen["listed"] == ["bare", "web"]
    assert seen["watched"] == ["DELETED", "bare"]
    code, message = seen["invalid"]
    assert code == 422 and "spec.maxReplicas: Invalid value: 1: must be greater than or " in message
    code, message = seen["invalid_status"]
    assert code == 422 and "status.desiredReplicas: Invalid value: -2" in message


def test_discovery_lists_scale_and_the_autoscaling_group(facade):
    from broker.facade import discovery

    apps = {r["name"]: r for r in discovery.resource_list("apps", "v1")["resources"]}
    for plural in ("deployments", "replicasets", "statefulsets"):
        sub = apps[f"{plural}/scale"]
        assert (sub["group"], sub["version"], sub["kind"]) == ("autoscaling", "v1", "Scale")
        assert sub["verbs"] == ["get", "patch", "update"]
    group = discovery.api_group("autoscaling")
    assert group["preferredVersion"]["groupVersion"] == "autoscaling/v2"
    hpa = {r["name"]: r for r in discovery.resource_list("autoscaling", "v2")["resources"]}
    assert hpa["horizontalpodautoscalers"]["shortNames"] == ["hpa"]
    assert hpa["horizontalpodautoscalers/status"]["kind"] == "HorizontalPodAutoscaler"


def _deployment(**spec):
    base = {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
        },
    }
    base.update(spec)
    return {"metadata": {"name": "web"}, "spec": base}


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"replicas": -1}, "spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
        (
            {"selector": {"matchLabels": {"app": "other"}}},
            "`selector` does not match template `labels`",
        ),
        (
            {"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}},
            "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy "
            "`type` is 'Recreate'",
        ),
        (
            {
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"},
                }
            },
            'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "0%": may not be 0 '
            "when `maxSurge` is 0",
        ),
        (
            {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "ten"}}},
            "a valid percent string must be a numeric string followed by an ending '%'",
        ),
        (
            {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "150%"}}},
            "must not be greater than 100%",
        ),
        ({"strategy": {"type": "BlueGreen"}}, 'spec.strategy.type: Unsupported value: "BlueGreen"'),
        (
            {"minReadySeconds": 700},
            "spec.progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds",
        ),
    ],
)
def test_bad_deployments_are_refused_with_the_servers_words(facade, spec, words):
    with pytest.raises(ApiError) as caught:
        facade.store.create("deployments.apps", _deployment(**spec), namespace="default")
    assert caught.value.code == 422
    assert words in caught.value.message
    assert caught.value.message.startswith('Deployment.apps "web" is invalid: ')


def test_an_update_is_checked_like_a_create(facade):
    facade.store.create("deployments.apps", _deployment(), namespace="default")
    with pytest.raises(ApiError) as caught:
        facade.store.patch("deployments.apps", "default", "web", {"spec": {"replicas": -3}})
    assert caught.value.code == 422
    assert facade.store.get("deployments.apps", "default", "web")["spec"]["replicas"] == 1


def test_defaults_fill_the_template_and_a_partial_rolling_update(facade):
    created = facade.store.create(
        "deployments.apps",
        _deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}),
        namespace="default",
    )
    assert created["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 2, "maxUnavailable": "25%"}
    template = created["spec"]["template"]["spec"]
    assert template["restartPolicy"] == "Always"
    assert template["terminationGracePeriodSeconds"] == 30
    assert template["containers"][0]["imagePullPolicy"] == "Always"  # untagged: latest


@pytest.mark.parametrize(
    ("value", "total", "up", "want"),
    [(3, 10, True, 3), ("25%", 10, True, 3), ("25%", 10, False, 2), ("0%", 7, True, 0),
     ("100%", 7, False, 7), ("1%", 1, True, 1), ("1%", 1, False, 0)],
)  # fmt: skip
def test_int_or_percent_rounds_like_intstr(value, total, up, want):
    assert scaled_value(value, total, up) == want


def test_a_string_that_is_not_a_percentage_is_an_error():
    with pytest.raises(ValueError, match="string is not a percentage"):
        scaled_value("3", 10, True)


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        ({"matchLabels": {"b": "2", "a": "1"}}, "a=1,b=2"),
        (
            {"matchExpressions": [
                {"key": "z", "operator": "NotIn", "values": ["y", "x"]},
                {"key": "m", "operator": "Exists"},
                {"key": "c", "operator": "DoesNotExist"},
            ]},
            "!c,m,z notin (x,y)",
        ),
        ({}, ""),
    ],
)  # fmt: skip
def test_selectors_print_as_the_server_prints_them(selector, text):
    assert format_selector(selector) == text
