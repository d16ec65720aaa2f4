#!/usr/bin/env bash
# test.sh: the README's test command (task test). The one-time set-up, then
# every package of the main module, then the conformance module; at the end,
# even after a failure, what each phase cost.
#
# Packages whose tests run Pace's own code in the test process run under
# -race. The end-to-end packages (end2end below) test Pace as the processes
# a user runs, built without the race detector, so -race would instrument
# only their harness; they run once without it, beside the -race run (the
# two share the two cores: most of an end-to-end test is waiting).
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
end2end='/(cmd/pace|docs|deploy/nats|integration/(pods|deploy|chaos))$'
tests() {
	local log status=0
	log=$(mktemp)
	# -ldflags=-s -w: no symbol table or DWARF in test binaries, a sixth of
	# their link time; stack traces and race reports keep their lines.
	go test -count=1 -parallel 4 -timeout 20m -ldflags='-s -w' $(go list ./... | grep -E "$end2end") >"$log" 2>&1 &
	local e2e=$!
	go test -race -count=1 -parallel 4 -timeout 20m -ldflags='-s -w' $(go list ./... | grep -vE "$end2end") || status=$?
	wait "$e2e" || status=$?
	echo "== end-to-end packages (no -race)"
	cat "$log"
	rm -f "$log"
	return "$status"
}
phase setup integration/scripts/test-setup.sh
phase "go test ./..." tests
phase conformance bash -c 'cd flowcontrol/conformance && go test -mod=mod -count=1 -timeout 20m ./...'
