"""Client-certificate authentication (issue 26 item 4): a certificate issued by the run's
CA authenticates as the user (CN) and groups (O) of its subject, as kube-apiserver's x509
authenticator does; one from another CA gets 401; tokens keep working."""

from __future__ import annotations

import datetime
import inspect
import json

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from broker.facade import Facade, ManualClock
from broker.facade.clientcert import CertAuthenticator, issue, issue_with
from broker.facade.endpoint import Endpoint
from broker.facade.kubeconfig import write_kubeconfig
from broker.facade.objects import make_node

POD = {
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}


@pytest.fixture
def facade():
    endpoint = Endpoint()
    endpoint.enable_https()
    f = Facade(ManualClock(), endpoint=endpoint)
    f.store.create("nodes", make_node("n1"))
    f.store.create("pods", json.loads(json.dumps(POD)))
    with f:
        yield f


def _api(kubeconfig) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(str(kubeconfig), client_configuration=cfg)
    return client.ApiClient(cfg)


def _bind(api: client.ApiClient) -> int:
    """A raw binder: ``call_api`` with no auth settings — the TLS certificate is all.
    Returns the HTTP status (the 24.x signature raises ApiException on an error)."""
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    path = "/api/v1/namespaces/default/pods/p/binding"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if "auth_settings" in inspect.signature(api.call_api).parameters:  # 24.x to 3x
        try:
            api.call_api(path, "POST", body=body, header_params=headers, auth_settings=[],
                         _preload_content=False)  # fmt: skip
        except ApiException as exc:
            return exc.status
        return 201
    # 37.x: call_api(method, url, ...) returns the raw response
    response = api.call_api("POST", api.configuration.host + path, header_params=headers,
                            body=body)  # fmt: skip
    response.read()
    return response.status


def _foreign_ca() -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "timewarp-ca")])  # same name
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def test_a_raw_binder_with_a_client_certificate_binds(facade, tmp_path):
    kubeconfig = facade.endpoint.write_cert_kubeconfig(
        tmp_path / "kc", "binder", ("system:masters",)
    )
    user = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]
    assert set(user) == {"client-certificate-data", "client-key-data"}  # no token at all
    assert _bind(_api(kubeconfig)) == 201
    pod = facade.store.get("pods", "default", "p")
    assert pod["spec"]["nodeName"] == "n1"
    # the tokens keep working on the same port
    token = facade.add_token("sched")
    write_kubeconfig(tmp_path / "tok", facade.endpoint.https_url, token,
                     ca_file=facade.tls_files.ca_cert)  # fmt: skip
    nodes = client.CoreV1Api(_api(tmp_path / "tok")).list_node()
    assert [n.metadata.name for n in nodes.items] == ["n1"]


def test_a_certificate_from_another_ca_gets_401(facade, tmp_path):
    ca_cert, ca_key = _foreign_ca()
    pem = issue_with(ca_cert, ca_key, "binder", ("system:masters",))
    kubeconfig = write_kubeconfig(tmp_path / "kc", facade.endpoint.https_url, None,
                                  ca_file=facade.tls_files.ca_cert, client_cert=pem)  # fmt: skip
    assert _bind(_api(kubeconfig)) == 401
    assert "nodeName" not in facade.store.get("pods", "default", "p")["spec"]


def test_the_subject_names_the_user_and_groups(facade):
    cert, _ = issue(facade.tls_files, "alice", ("dev", "ops"))
    der = x509.load_pem_x509_certificate(cert).public_bytes(Encoding.DER)
    authn = CertAuthenticator(facade.tls_files.ca_cert.read_bytes())
    assert authn.identify(der) == ("alice", ("dev", "ops"))
    ca_cert, ca_key = _foreign_ca()
    foreign, _ = issue_with(ca_cert, ca_key, "alice")
    der = x509.load_pem_x509_certificate(foreign).public_bytes(Encoding.DER)
    assert authn.identify(der) is None
