"""A scheduler written with the standard library only, the way a script author would:
urllib.request (a new connection per request, "Connection: close"), the kubeconfig read
with PyYAML, a polling loop with time.sleep. Binds each pending pod to the node with the
fewest pods bound to it."""

import json
import os
import time
import urllib.request

import yaml

with open(os.environ["KUBECONFIG"]) as f:
    kubeconfig = yaml.safe_load(f)
SERVER = kubeconfig["clusters"][0]["cluster"]["server"]
TOKEN = kubeconfig["users"][0]["user"]["token"]


def call(method, path, body=None):
    request = urllib.request.Request(
        SERVER + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


while True:
    nodes = sorted(n["metadata"]["name"] for n in call("GET", "/api/v1/nodes")["items"])
    pods = call("GET", "/api/v1/pods")["items"]
    load = {name: 0 for name in nodes}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node and pod["status"].get("phase") not in ("Succeeded", "Failed"):
            load[node] += 1
    for pod in pods:
        if pod["spec"].get("nodeName") or pod["spec"].get("schedulerName") != "default":
            continue
        node = min(nodes, key=lambda n: (load[n], n))
        if load[node] >= 1:  # one 1-cpu job per 1-core node
            break
        meta = pod["metadata"]
        call(
            "POST",
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding",
            {"metadata": {"name": meta["name"]}, "target": {"kind": "Node", "name": node}},
        )
        load[node] += 1
    time.sleep(5)
