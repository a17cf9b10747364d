"""A time-based scaler as people write them for a pod: plain `requests`, the service
account read from its files, the API from the service-link environment. Business hours
(simulated t in [600, 1800) s) get 3 replicas of the Deployment, other times 1."""

import os
import sys
import time

import requests

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
DEPLOYMENT = sys.argv[1] if len(sys.argv) > 1 else "web"

with open(f"{SA}/token") as f:
    token = f.read().strip()
with open(f"{SA}/namespace") as f:
    namespace = f.read().strip()
api = (
    f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT_HTTPS']}"
)
session = requests.Session()
session.headers["Authorization"] = f"Bearer {token}"
session.verify = f"{SA}/ca.crt"
url = f"{api}/apis/apps/v1/namespaces/{namespace}/deployments/{DEPLOYMENT}"

start = time.time()
while True:
    elapsed = time.time() - start
    want = 3 if 600 <= elapsed < 1800 else 1
    current = session.get(url, timeout=10)
    current.raise_for_status()
    have = current.json()["spec"]["replicas"]
    if have != want:
        r = session.patch(
            url,
            json={"spec": {"replicas": want}},
            headers={"Content-Type": "application/merge-patch+json"},
            timeout=10,
        )
        r.raise_for_status()
        print(f"t={elapsed:.0f}s {namespace}/{DEPLOYMENT}: {have} -> {want} replicas", flush=True)
    time.sleep(60)
