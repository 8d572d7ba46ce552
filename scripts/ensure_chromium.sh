#!/usr/bin/env bash
# Makes sure Debian's chromium is there for the console's browser tests
# (tests/e2e/test_console_browser.py, driven by Playwright). When it is
# missing and we are root with apt-get (CI runs as root on Debian), installs
# it with the CJK fonts its screenshots need. With CI=true a browser that
# is still missing fails the run; elsewhere the browser tests skip with the
# reason.
set -euo pipefail
if [ -n "${GRAPHMESH_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the console browser tests" >&2
  apt-get update -qq || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk >/dev/null || true
fi
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [ "${CI:-}" = "true" ]; then
  echo "error: CI=true and chromium is missing: apt-get install -y chromium (needs root)" >&2
  exit 1
fi
echo "warning: chromium is missing (apt-get install -y chromium as root); the console browser tests will skip" >&2
