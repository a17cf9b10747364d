"""core/v1 Secrets and ServiceAccounts, stored as kube-apiserver stores them (what an
operator creates beside its Deployments), through the official client's typed models."""

from __future__ import annotations

import pytest
import requests
from kubernetes import client

from broker.facade import Facade, ManualClock

SECRETS = "/api/v1/namespaces/default/secrets"


@pytest.fixture
def facade():
    f = Facade(ManualClock()).start()
    yield f
    f.stop()


@pytest.fixture
def session(facade):
    s = requests.Session()
    s.trust_env = False
    s.headers["Authorization"] = f"Bearer {facade.add_token('t')}"
    return s


def test_string_data_is_merged_into_data_and_never_stored(facade, session):
    body = {
        "metadata": {"name": "db"},
        "data": {"user": "YWRtaW4=", "password": "b2xk"},
        "stringData": {"password": "hunter2"},
    }
    made = session.post(facade.url + SECRETS, json=body).json()
    assert made["type"] == "Opaque"
    assert made["data"] == {"user": "YWRtaW4=", "password": "aHVudGVyMg=="}
    assert "stringData" not in made
    listed = session.get(facade.url + SECRETS, params={"fieldSelector": "type=Opaque"}).json()
    assert [s["metadata"]["name"] for s in listed["items"]] == ["db"]
    assert (
        session.get(facade.url + SECRETS, params={"fieldSelector": "type=x"}).json()["items"] == []
    )


@pytest.mark.parametrize(
    "data, status, message",
    [
        ({"user": "YWRtaW4!"}, 400, "illegal base64 data at input byte 7"),
        ({"user": "abc"}, 400, "illegal base64 data at input byte 0"),
        ({"a b": "YQ=="}, 422, 'data[a b]: Invalid value: "a b": a valid config key must consist'),
    ],
)
def test_data_is_base64_under_config_keys(facade, session, data, status, message):
    r = session.post(facade.url + SECRETS, json={"metadata": {"name": "s"}, "data": data})
    assert r.status_code == status
    assert message in r.json()["message"]


def test_the_official_client_round_trips_secrets_and_service_accounts(facade, tmp_path):
    from kubernetes import config

    api = config.new_client_from_config(str(facade.write_kubeconfig(tmp_path / "kc", "op")))
    core = client.CoreV1Api(api)
    core.create_namespaced_secret(
        "default",
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="tls"),
            type="kubernetes.io/tls",
            string_data={"tls.crt": "x", "tls.key": "y"},
        ),
    )
    secret = core.read_namespaced_secret("tls", "default")
    assert (secret.type, secret.data) == (
        "kubernetes.io/tls",
        {"tls.crt": "eA==", "tls.key": "eQ=="},
    )
    core.create_namespaced_service_account(
        "default", client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="bot"))
    )
    assert [a.metadata.name for a in core.list_namespaced_service_account("default").items] == [
        "bot"
    ]
    api.close()
