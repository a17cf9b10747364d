#!/usr/bin/env bash
# The main job: a program simulated under timewarp's virtual clock.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
exec .venv/bin/timewarp run --standalone -- .venv/bin/python examples/ticking_day.py "$@"
