#!/usr/bin/env bash
# The main job: the default_like sample scheduler (an ordinary Kubernetes scheduler using the
# official client and real `time`) simulated on the bundled 40-job burst workload and 16-node
# platform, with the embedded Batsim-compatible simulator, in deterministic virtual time.
# Outputs (Batsim CSVs, manifest, Gantt and utilisation plots, logs) land in out/main/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
exec .venv/bin/timewarp simulate \
  --scheduler "python -m sample_schedulers.default_like --scheduler-name default" \
  --platform examples/inputs/cluster16.xml \
  --workload examples/inputs/burst_40_delay170.json \
  --output out/main "$@"
