#!/usr/bin/env bash
# ensure-chromium.sh: make sure a Chromium the UI's browser tests can drive is
# installed, and print its path. As root it installs Debian's chromium package
# (about a minute, once per machine); otherwise it names the one command to run.
# PACE_CHROMIUM names another binary.
set -euo pipefail
for name in "${PACE_CHROMIUM:-}" chromium chromium-browser google-chrome; do
  if [ -n "$name" ] && path=$(command -v "$name"); then
    echo "$path"
    exit 0
  fi
done
if [ "$(id -u)" -ne 0 ]; then
  echo "no Chromium: the UI's browser tests need it. Install it once with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y chromium" >&2
  echo "or set PACE_CHROMIUM to a Chromium or Chrome binary." >&2
  exit 1
fi
echo "installing Debian's chromium (one time, about a minute)" >&2
log=$(mktemp)
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "apt-get install chromium failed (above)" >&2
  exit 1
fi
rm -f "$log"
command -v chromium
