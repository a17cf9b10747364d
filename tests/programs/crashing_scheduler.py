"""A scheduler that dies after a while (simulated): the broker must say so clearly."""

import sys
import time

from kubernetes import client, config

config.load_kube_config()
client.CoreV1Api().list_node()
time.sleep(30)
print("giving up", flush=True)
sys.exit(7)
