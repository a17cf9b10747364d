#!/usr/bin/env bash
# The test suite, as CI runs it. Extra arguments go to pytest (e.g. -m slow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
exec .venv/bin/python -m pytest -n 2 "$@"
