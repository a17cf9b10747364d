#!/usr/bin/env bash
# Create (or refresh) ./.venv with timewarp and its dependencies. Idempotent: re-installs
# only when pyproject.toml changed since the last install. Works on a machine that has
# only Python >= 3.11, pip and Debian's apt.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "timewarp needs Python >= 3.11 (found: $("$PY" --version 2>&1))" >&2
  exit 2
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$PY" -m venv .venv 2>/dev/null; then
    echo "python3 -m venv failed; installing Debian's python3-venv" >&2
    rm -rf .venv
    if command -v apt-get >/dev/null; then
      SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
      $SUDO apt-get update -qq && $SUDO apt-get install -y -qq python3-venv >/dev/null
    fi
    "$PY" -m venv .venv
  fi
fi
stamp=.venv/.timewarp-installed
want=$(cat pyproject.toml scripts/setup-venv.sh | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # 'compat' puts the checkout on sys.path with a plain .pth line; the default editable
  # mode imports a finder module at every interpreter start (10-50 ms per process, and a
  # simulation starts many). Fall back to the default if setuptools no longer has it.
  .venv/bin/python -m pip install -q -e '.[dev,sweep]' --config-settings editable_mode=compat 2>/dev/null ||
    .venv/bin/python -m pip install -q -e '.[dev,sweep]'
  # pybatsim (conformance tests of the simulator): 3.2.1 pins pyzmq<23, which does not
  # build on 3.11, so it goes in without its pins beside the current pyzmq.
  .venv/bin/python -m pip install -q --no-deps pybatsim==3.2.1 docopt==0.6.2 sortedcontainers
  echo "$want" > "$stamp"
fi
# The old-style kubernetes client (pre-37 model layer) for the facade's compatibility tests,
# kept out of the venv's site-packages; tests put .venv/k8s24 first on PYTHONPATH.
# Best effort: without it those tests are skipped, nothing else depends on it.
if [ ! -f .venv/k8s24/kubernetes/__init__.py ]; then
  if ! { .venv/bin/python -m pip install -q --target .venv/k8s24 --no-deps kubernetes==24.2.0 six &&
         .venv/bin/python -m pip install -q --target .venv/k8s24 "google-auth>=2,<2.30"; }; then
    rm -rf .venv/k8s24
    echo "warning: could not install kubernetes 24.2.0 into .venv/k8s24; old-client tests will be skipped" >&2
  fi
fi
# Bytecode for the checkout's own modules (an editable install compiles none): where
# PYTHONDONTWRITEBYTECODE is set, as some sandboxes and CI runners do, every interpreter
# would compile them again at start-up, and a simulation starts several. Stale files are
# harmless: Python checks each against its source.
.venv/bin/python -m compileall -q -j 0 timewarp commands broker simulator patcher sample_schedulers >/dev/null || true
