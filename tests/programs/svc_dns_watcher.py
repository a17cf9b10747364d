"""A cluster reporter that talks to the API by its in-cluster name, as a pod would:
https://kubernetes.default.svc with the service account's CA file and token."""

import pathlib
import time

import requests

SA = pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount")
assert SA.is_dir() and (SA / "token").exists(), "no service account mounted"
token = (SA / "token").read_text().strip()
namespace = (SA / "namespace").read_text().strip()
headers = {"Authorization": f"Bearer {token}"}
ca = str(SA / "ca.crt")

while True:
    nodes = requests.get(
        "https://kubernetes.default.svc/api/v1/nodes", headers=headers, verify=ca, timeout=10
    ).json()["items"]
    pods = requests.get(
        f"https://kubernetes.default.svc.cluster.local:443/api/v1/namespaces/{namespace}/pods",
        headers=headers,
        verify=ca,
        timeout=10,
    ).json()["items"]
    running = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running")
    print(f"{len(nodes)} nodes, {len(pods)} pods in {namespace}, {running} running", flush=True)
    time.sleep(300)
