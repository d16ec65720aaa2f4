#!/usr/bin/env bash
# build.sh [OUT_DIR]: build kube-apiserver, etcd, kube-controller-manager,
# kube-scheduler, kwok (with its pod and node stages), kustomize, and the real
# node's kubelet (v1.34, module kubelet/) and pause binary (gcc -static) from
# the Go module proxy into OUT_DIR (default ~/.cache/pace-kube) and print OUT_DIR. The first
# build takes 10-15 minutes on 2 cores; later runs find OUT_DIR/stamp matching
# this script, the modules it builds and the Go version, and return at once.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${1:-$HOME/.cache/pace-kube}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
stamp=$( (cat build.sh go.sum kustomize/go.sum kubelet/go.sum ../kwoktools/go.sum; go version; gcc --version) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$OUT"
  exit 0
fi
echo "building kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok and kustomize into $OUT (one time, 10-15 minutes on 2 cores)" >&2
V=k8s.io/component-base/version
export GOFLAGS=-mod=mod
go build -ldflags "-X $V.gitVersion=v1.37.2 -X $V.gitMajor=1 -X $V.gitMinor=37 -X $V.gitTreeState=clean" \
  -o "$OUT/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
go build -o "$OUT/etcd" go.etcd.io/etcd/server/v3 >&2
for c in kube-controller-manager kube-scheduler; do
  go build -ldflags "-X $V.gitVersion=v1.37.2 -X $V.gitMajor=1 -X $V.gitMinor=37 -X $V.gitTreeState=clean" \
    -o "$OUT/$c" "k8s.io/kubernetes/cmd/$c" >&2
done
(cd kustomize && go build -o "$OUT/kustomize" sigs.k8s.io/kustomize/kustomize/v5 >&2)
# The real node: kubelet v1.34 (the newest verified with Debian's containerd
# 1.6 on cgroup v1) and the sandbox's pause process from the same module.
(cd kubelet &&
  go build -ldflags "-X $V.gitVersion=v1.34.4 -X $V.gitMajor=1 -X $V.gitMinor=34 -X $V.gitTreeState=clean" \
    -o "$OUT/kubelet" k8s.io/kubernetes/cmd/kubelet >&2 &&
  gcc -static -O2 -o "$OUT/pause" "$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c" >&2)
cd ../kwoktools
go build -o "$OUT/kwok" sigs.k8s.io/kwok/cmd/kwok >&2
# kwok has no built-in stages: nodes become ready, pods run until deleted.
KWOK=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
for f in node/fast/node-initialize pod/fast/pod-ready pod/fast/pod-delete; do
  cat "$KWOK/kustomize/stage/$f.yaml"; echo "---"
done > "$OUT/kwok-stages.yaml"
echo "$stamp" > "$OUT/stamp"
echo "$OUT"
