#!/usr/bin/env bash
# Idempotent: a headless browser for the test that opens the tuning report (tests/offline/test_tune.py).
# Installs Debian's `chromium` package when it is missing and apt-get is at hand (as root, or through sudo).
# Elsewhere it says so and leaves the choice to you: that test then skips, or fails when CI=true.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: no chromium and no apt-get; install a Chromium browser for the HTML report test" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
    echo "setup: no chromium; run 'sudo apt-get install chromium' for the HTML report test" >&2
    exit 0
  fi
fi
start=$(date +%s)
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "setup: chromium installed in $(( $(date +%s) - start )) s"
