"""What a WorkerPool's owner does with the official client: (with --create-crd) install
the CRD first, as a setup step would; then create a pool of 2 workers at t=10 s (unless
the workload declared it), grow it to 3 at t=100 s, and delete it at t=250 s; print what
the pool's status says before each step."""

import json
import sys
import time
from pathlib import Path

from kubernetes import client, config
from kubernetes.client.rest import ApiException

GROUP, VERSION, PLURAL = "batch.example.com", "v1", "workerpools"
HERE = Path(__file__).resolve().parent

config.load_kube_config()
api = client.ApiClient()
objects = client.CustomObjectsApi(api)
start = time.time()


def at(seconds):
    time.sleep(max(0.0, start + seconds - time.time()))


def status(name):
    pool = objects.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
    return json.dumps(pool.get("status", {}), sort_keys=True)


if "--create-crd" in sys.argv:
    crd = json.loads((HERE / "crd.json").read_text())
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    print("installed the WorkerPool CRD", flush=True)

at(10)
try:
    objects.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "render")
    print("pool render was declared", flush=True)
except ApiException as exc:
    if exc.status != 404:
        raise
    pool = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "WorkerPool",
        "metadata": {"name": "render"},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"annotations": {"timewarp.io/duration": "400"}},
                "spec": {
                    "schedulerName": "default",
                    "containers": [
                        {
                            "name": "worker",
                            "image": "render:1",
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                },
            },
        },
    }
    objects.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, pool)
    print("created pool render", flush=True)
at(100)
print(f"t=100 status {status('render')}", flush=True)
objects.patch_namespaced_custom_object(
    GROUP, VERSION, "default", PLURAL, "render", {"spec": {"replicas": 3}}
)
print("grew pool render to 3", flush=True)
at(250)
print(f"t=250 status {status('render')}", flush=True)
objects.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "render")
print("deleted pool render", flush=True)
while True:
    try:
        objects.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "render")
    except ApiException as exc:
        if exc.status == 404:
            break
        raise
    time.sleep(1)
print(f"pool render gone at t={time.time() - start:.0f}", flush=True)
