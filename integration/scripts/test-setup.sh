#!/usr/bin/env bash
# test-setup.sh: the one-time set-up the test suite needs, done before any
# test starts so that no package's timeout contains a build: Chromium, jq,
# python3 and Node.js for the browser and documentation tests, the NATS CLI
# and nats.js for docs/clients.md's examples, kube-apiserver, etcd and
# friends for the Kubernetes tests, containerd, runc and the CNI plugins
# (Debian) and a kubelet for the real node's, InfluxDB 1.8 for the sinks. Each step
# returns at once when its output is already there. The first run on a fresh
# machine takes about 15 minutes, nearly all of it the kube binaries
# (docs/development.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
step() { local t=$SECONDS; "$@" >/dev/null; echo "setup: $1 ok ($((SECONDS - t)) s)"; }
# The kube binaries are most of a first run's set-up, nearly all of it
# compiling: they build in the background while the other steps, mostly
# downloads and apt-get, go on beside them.
step integration/kubetools/build.sh &
kube=$!
step integration/scripts/ensure-tools.sh
step integration/scripts/ensure-clients.sh
step integration/scripts/ensure-node-packages.sh
step integration/scripts/ensure-influxd.sh
wait "$kube"
