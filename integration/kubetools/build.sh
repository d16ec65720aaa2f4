#!/usr/bin/env bash
# build.sh [OUT_DIR]: build kube-apiserver and etcd from the Go module proxy
# into OUT_DIR (default ~/.cache/pace-kube) and print OUT_DIR. The first build
# takes 5-10 minutes on 2 cores; later ones relink from the Go build cache.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${1:-$HOME/.cache/pace-kube}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
V=k8s.io/component-base/version
export GOFLAGS=-mod=mod
go build -ldflags "-X $V.gitVersion=v1.37.2 -X $V.gitMajor=1 -X $V.gitMinor=37 -X $V.gitTreeState=clean" \
  -o "$OUT/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
go build -o "$OUT/etcd" go.etcd.io/etcd/server/v3 >&2
echo "$OUT"
