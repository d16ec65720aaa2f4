#!/usr/bin/env bash
# Squares: push numbers, square them with a shell worker, print the results.
# Needs a running `pace up` (NATS on 127.0.0.1:4222; set PACE_NATS_URL for
# another address). Run from anywhere: examples/squares/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o bin/pace ./cmd/pace
seq 1 100 | bin/pace push squares
bin/pace worker squares --exec 'read n; echo $((n*n))' --concurrency 4 &
worker=$!
bin/pace results squares | sort -n | tail -3
kill -TERM "$worker" && wait "$worker"
