#!/usr/bin/env bash
# Monitoring: run a job with `pace up`, watch its progress on /metrics and in
# a real InfluxDB 1.8 (built once from the Go module proxy, ~2 min the first
# time). Everything runs on loopback ports in a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o bin/pace ./cmd/pace
INFLUXD=$(integration/scripts/ensure-influxd.sh)
D=$(mktemp -d)
cleanup() { kill -INT "${worker:-}" "${pace:-}" "${influxd:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT

INFLUXDB_HTTP_BIND_ADDRESS=127.0.0.1:18086 INFLUXDB_BIND_ADDRESS=127.0.0.1:18088 \
INFLUXDB_META_DIR=$D/meta INFLUXDB_DATA_DIR=$D/data INFLUXDB_DATA_WAL_DIR=$D/wal \
INFLUXDB_HTTP_FLUX_ENABLED=false INFLUXDB_REPORTING_DISABLED=true INFLUXDB_MONITOR_STORE_ENABLED=false \
INFLUXDB_HTTP_LOG_ENABLED=false "$INFLUXD" run -config /dev/null >"$D/influxd.log" 2>&1 &
influxd=$!
until curl -sf -o /dev/null http://127.0.0.1:18086/ping; do sleep 0.1; done
curl -s -XPOST http://127.0.0.1:18086/query --data-urlencode 'q=CREATE DATABASE asperathos' >/dev/null

# Asperathos' database name, so its Grafana dashboards read these points.
PACE_INFLUX_URL=http://127.0.0.1:18086 bin/pace up --data "$D/pace" --http 127.0.0.1:18080 \
  --nats-listen 127.0.0.1:14222 --influx-bucket asperathos/autogen --sample-interval 500ms >"$D/up.out" 2>"$D/up.log" &
pace=$!
until curl -sf -o /dev/null http://127.0.0.1:18080/readyz; do sleep 0.1; done
export PACE_NATS_URL=nats://127.0.0.1:14222

seq 1 200 | bin/pace push squares
bin/pace worker squares --exec 'sleep 0.02; read n; echo $((n*n))' --concurrency 4 2>/dev/null &
worker=$!
for _ in 1 2 3 4 5 6; do
  sleep 1
  curl -s http://127.0.0.1:18080/metrics | grep -E '^pace_job_(items_done|backlog_items|throughput_items_per_second|replicas)\{job="squares"\}' | tr '\n' ' '
  echo
done
echo "InfluxDB (last job_progress point):"
curl -s http://127.0.0.1:18086/query --data-urlencode db=asperathos \
  --data-urlencode "q=SELECT last(\"done\"), last(\"throughput\") FROM job_progress WHERE job='squares'"
echo
