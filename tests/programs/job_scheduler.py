"""Creates the batch/v1 Jobs listed in a JSON file (official client, at start-up), then
schedules pods like tiny_scheduler.py (whose loop it runs)."""

import argparse
import json
import sys

from kubernetes import client, config

parser = argparse.ArgumentParser()
parser.add_argument("--jobs", required=True, help="JSON list of Job manifests")
parser.add_argument("--scheduler-name", default="default")
args = parser.parse_args()
config.load_kube_config()
batch = client.BatchV1Api()
with open(args.jobs) as f:
    for manifest in json.load(f):
        namespace = manifest.get("metadata", {}).get("namespace", "default")
        batch.create_namespaced_job(namespace, manifest)
        print(f"created job {namespace}/{manifest['metadata']['name']}", flush=True)

sys.argv = [sys.argv[0], "--scheduler-name", args.scheduler_name]
import tiny_scheduler  # noqa: E402,F401  (its module body is the scheduling loop)
