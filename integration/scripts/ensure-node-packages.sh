#!/usr/bin/env bash
# ensure-node-packages.sh: install from Debian what the real node of
# integration/pods needs (docs/deploy.md, "A one-node cluster"): containerd,
# runc, the CNI plugins, iptables, gcc (the pause binary) and a static
# busybox (the shell of the test worker image). Returns at once when they
# are all there; the first run takes about 20 s.
set -euo pipefail
want=(containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins
  iptables:iptables gcc:gcc busybox:busybox-static)
missing=()
for w in "${want[@]}"; do
  cmd=${w%%:*} pkg=${w#*:}
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "$cmd" ]; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (apt-get)" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
