#!/usr/bin/env bash
# ensure-tools.sh: make sure the programs the tests drive are installed:
# Chromium for the UI's browser tests, jq, python3 and Node.js (with npm)
# for the documented commands that docs/docs_test.go runs, redis-cli and
# python3-redis for the Redis front's Asperathos workers, redis-server for
# the front's differential tests (the same commands to both, replies compared). As root, what is
# missing is installed from Debian's packages (about a minute, once per
# machine); otherwise the script names the one command to run. PACE_CHROMIUM
# names another browser.
set -euo pipefail
missing=()
chromium=""
for name in "${PACE_CHROMIUM:-}" chromium chromium-browser google-chrome; do
  if [ -n "$name" ] && command -v "$name" >/dev/null; then chromium=$name; break; fi
done
[ -n "$chromium" ] || missing+=(chromium)
command -v jq >/dev/null || missing+=(jq)
command -v python3 >/dev/null || missing+=(python3)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v redis-server >/dev/null || missing+=(redis-server)
# The Redis front's tests run an Asperathos worker with a real Redis client.
python3 -c 'import redis' 2>/dev/null || /usr/bin/python3 -c 'import redis' 2>/dev/null || missing+=(python3-redis)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing ${missing[*]}: the tests need them. Install them once with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  echo "(PACE_CHROMIUM may name another Chromium or Chrome binary)" >&2
  exit 1
fi
echo "installing ${missing[*]} from Debian's packages (one time, about a minute)" >&2
log=$(mktemp)
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "apt-get install ${missing[*]} failed (above)" >&2
  exit 1
fi
rm -f "$log"
