#!/usr/bin/env bash
# ensure-influxd.sh: build InfluxDB 1.8.10 from the Go module proxy once per
# machine and print the binary's path. Later runs reuse it (0.1 s).
# InfluxDB >= 1.9 and 2.x need the Rust libflux and cannot be built offline.
set -euo pipefail
INFLUXD_VERSION=1.8.10
INFLUXD_DIR="${INFLUXD_DIR:-$HOME/.cache/influxd-$INFLUXD_VERSION}"
INFLUXD_BIN="$INFLUXD_DIR/influxd"
if ! "$INFLUXD_BIN" version 2>/dev/null | grep -q "v$INFLUXD_VERSION "; then
  echo "building influxd $INFLUXD_VERSION into $INFLUXD_DIR (one time, about 2 minutes)" >&2
  GOFLAGS= GOBIN="$INFLUXD_DIR" go install \
    -ldflags "-X main.version=$INFLUXD_VERSION -X main.commit=go-install -X main.branch=v$INFLUXD_VERSION" \
    "github.com/influxdata/influxdb/cmd/influxd@v$INFLUXD_VERSION" >&2
fi
echo "$INFLUXD_BIN"
