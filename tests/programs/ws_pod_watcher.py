"""A pod watcher over WebSocket, as people write one without a client library: the
service account's token and CA, the API from the service-link environment,
``?watch=true`` with websocket-client, one line per event; when the server ends the
watch, watch again from the last resourceVersion.

    python ws_pod_watcher.py NAMESPACE            (in a pod)
"""

import json
import os
import sys
import time

import websocket

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
NAMESPACE = sys.argv[1] if len(sys.argv) > 1 else "default"

with open(f"{SA}/token") as f:
    token = f.read().strip()
host = os.environ["KUBERNETES_SERVICE_HOST"]
port = os.environ["KUBERNETES_SERVICE_PORT_HTTPS"]
base = f"wss://{host}:{port}/api/v1/namespaces/{NAMESPACE}/pods?watch=true"

version = ""
start = time.time()
while True:
    url = base + (f"&resourceVersion={version}" if version else "")
    ws = websocket.create_connection(
        url,
        header=[f"Authorization: Bearer {token}"],
        sslopt={"ca_certs": f"{SA}/ca.crt"},
    )
    try:
        while True:
            message = ws.recv()
            if not message:  # a close frame: the server ended the watch
                break
            event = json.loads(message)
            pod = event["object"]
            version = pod["metadata"]["resourceVersion"]
            phase = (pod.get("status") or {}).get("phase", "")
            node = (pod.get("spec") or {}).get("nodeName", "")
            print(
                f"t={time.time() - start:.0f}s {event['type']} {pod['metadata']['name']} "
                f"{phase} {node}".rstrip(),
                flush=True,
            )
    except websocket.WebSocketConnectionClosedException:
        pass
    finally:
        ws.close()
    print(f"t={time.time() - start:.0f}s watch ended, watching again", flush=True)
