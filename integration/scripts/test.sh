#!/usr/bin/env bash
# test.sh: the README's test command (task test). The one-time set-up, then
# every package of the main module under -race, then the conformance
# module; at the end, even after a failure, what each phase cost.
set -euo pipefail
cd "$(dirname "$0")/../.."
costs=()
report() { echo "test phases: ${costs[*]:-none} total $SECONDS s"; }
trap report EXIT
phase() {
	local name=$1 t=$SECONDS status=0
	shift
	"$@" || status=$?
	costs+=("$name $((SECONDS - t)) s$([ "$status" -eq 0 ] || echo " (failed)");")
	return "$status"
}
phase setup integration/scripts/test-setup.sh
phase "go test -race ./..." go test -race -count=1 -timeout 20m ./...
phase conformance bash -c 'cd flowcontrol/conformance && go test -mod=mod -count=1 -timeout 20m ./...'
