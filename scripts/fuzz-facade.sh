#!/usr/bin/env bash
# The facade fuzzer's long profile (outside CI): 2,000 randomized examples per class of
# malformed request; prints the statuses seen per class. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
HYPOTHESIS_PROFILE=long exec .venv/bin/python -m pytest -q -s -p no:randomly tests/test_facade_fuzz.py "$@"
