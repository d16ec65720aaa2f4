#!/usr/bin/env bash
# build.sh [OUT_DIR]: build, from the Go module proxy, the Kubernetes
# binaries the integration tests run: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl (v1.37.2), the real
# node's kubelet (the same version) and pause process (gcc -static), kwok
# (fake nodes) with its pod and node stages, and kustomize, into OUT_DIR
# (default ~/.cache/pace-kube), and print OUT_DIR. The first build takes
# about 12 minutes on 2 cores; later runs find OUT_DIR/stamp matching this
# script, the modules it builds and the Go version, and return at once.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${1:-$HOME/.cache/pace-kube}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
stamp=$( (cat build.sh go.sum kustomize/go.sum; go version; gcc --version) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$OUT"
  exit 0
fi
echo "building the Kubernetes binaries into $OUT (one time, about 12 minutes on 2 cores)" >&2
# Static, -trimpath, and each module at the version Pace's and the
# conformance module's go.mod select (TestSharedPackagesCompileOnce): the
# Kubernetes libraries these binaries share with the end-to-end tests and
# the conformance module (client-go, apiserver, ~700 packages) compile here
# once and are found in the build cache there.
export GOFLAGS=-mod=mod CGO_ENABLED=0
t=$SECONDS
built() { echo "built $1 ($((SECONDS - t)) s)" >&2; t=$SECONDS; }
# One module, so one version of each package, and one go build: the
# binaries share most of their packages, compiled once. -s -w: nobody
# debugs them here, and the links are shorter.
V=k8s.io/component-base/version
go build -trimpath -ldflags "-s -w -X $V.gitVersion=v1.37.2 -X $V.gitMajor=1 -X $V.gitMinor=37 -X $V.gitTreeState=clean" -o "$OUT/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet sigs.k8s.io/kwok/cmd/kwok >&2
built "kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet and kwok"
go build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3 >&2
# The real node's sandbox process. The kubelet works with Debian's
# containerd 1.6 on cgroup v1 when its configuration says failCgroupV1: false.
gcc -static -O2 -o "$OUT/pause" "$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c" >&2
# kwok has no built-in stages: nodes become ready, pods run until deleted.
KWOK=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
for f in node/fast/node-initialize pod/fast/pod-ready pod/fast/pod-delete; do
  cat "$KWOK/kustomize/stage/$f.yaml"
  echo "---"
done >"$OUT/kwok-stages.yaml"
built "etcd and pause"
(cd kustomize && go build -trimpath -ldflags "-s -w" -o "$OUT/kustomize" sigs.k8s.io/kustomize/kustomize/v5 >&2)
built kustomize
echo "$stamp" >"$OUT/stamp"
echo "$OUT"
