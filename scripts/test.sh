#!/usr/bin/env bash
# The test suite, as CI runs it. Extra arguments go to pytest (e.g. -m slow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh

# Real Batsim 4.2.1 beside the checkout: install the Debian run-time packages its README
# lists, unless they are there already (`ldd` finds every library: nothing to do). The
# tests marked `batsim` run it; without it they skip with the reason — under CI they fail.
BATSIM_DIR=../shared/tools/batsim-4.2.1
if [ -x "$BATSIM_DIR/bin/batsim" ] && ldd "$BATSIM_DIR/bin/batsim" | grep -q 'not found'; then
  packages=$(sed -n 's/.*apt-get install -y \(.*\)$/\1/p' "$BATSIM_DIR/README.md" | head -1)
  if [ -z "$packages" ]; then
    echo "test.sh: cannot read the package list from $BATSIM_DIR/README.md" >&2
    exit 2
  fi
  echo "test.sh: installing real Batsim's run-time packages: $packages" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  # shellcheck disable=SC2086  # one word per package
  if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $packages >/dev/null; }; then
    echo "test.sh: could not install them; the real-Batsim tests will skip (fail under CI)" >&2
    [ "${CI:-}" = "true" ] && exit 2
  fi
fi
# Headless Chromium (Debian's package) for the tests that check what an HTML report draws;
# without it they skip with the reason — under CI they fail.
if ! command -v chromium >/dev/null 2>&1; then
  echo "test.sh: installing Debian's chromium for the HTML report tests" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null; }; then
    echo "test.sh: could not install it; the browser tests will skip (fail under CI)" >&2
    [ "${CI:-}" = "true" ] && exit 2
  fi
fi
exec .venv/bin/python -m pytest -n 2 "$@"
