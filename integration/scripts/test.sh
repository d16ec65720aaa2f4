#!/usr/bin/env bash
# test.sh: the README's test command (also task test). The one-time set-up, then
# every package of the main module, then the conformance module; at the end,
# even after a failure, what each phase cost.
#
# Packages whose tests run Pace's own code in the test process run under
# -race. The end-to-end packages (end2end below) test Pace as the processes
# a user runs, built without the race detector, so -race would instrument
# only their harness; they run once, without it, after the others. (Both
# runs at once were faster, but starved the two cores into timeouts.)
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
# go test starts packages in the order given: the slowest first, so that
# neither core idles while the last one runs alone; the real node's last,
# with the least else running (a busy machine starts its containers slowly).
slowest='/(bus|integration|stages/manager|cmd/pace)$'
last='/integration/pods$'
# -s -w: a sixth less link time; traces keep their lines. -trimpath: the
# build cache keys compiled packages by their sources' directory otherwise,
# so a clone at a new path (CI's) would compile every package again.
flags=(-count=1 -parallel 4 -timeout 20m -trimpath -ldflags='-s -w')
# go test links every test binary again on each run (4-6 s of a core for
# one under -race), but -o keeps them, and the go command links none whose
# kept copy is up to date: a warm run links only what changed. About 2 GiB;
# PACE_TEST_BINARIES moves them.
bins=${PACE_TEST_BINARIES:-$HOME/.cache/pace-test-binaries}
mkdir -p "$bins/race" "$bins/static"
export GORACE="${GORACE:-atexit_sleep_ms=0}"               # else each -race test binary sleeps 1 s before it exits
# go list downloads the main module's dependencies on a first run: beside
# the set-up, whose kube build compiles meanwhile.
pkgs_file=$(mktemp)
go list ./... >"$pkgs_file" &
list_pid=$!
ordered() { # the packages grep "$@" selects: the slowest, the rest in go list's order, the last
	local p
	p=$(grep "$@" <<<"$pkgs")
	grep -E "$slowest" <<<"$p" || true
	grep -vE "$slowest|$last" <<<"$p" || true
	grep -E "$last" <<<"$p" || true
}
phase setup integration/scripts/test-setup.sh
wait "$list_pid"
pkgs=$(<"$pkgs_file")
rm -f "$pkgs_file"
phase "go test -race" go test -race -o "$bins/race/" "${flags[@]}" $(ordered -vE "$end2end")
# The conformance module, static: the Kubernetes libraries it shares with
# the kube build (TestSharedPackagesCompileOnce) are compiled already. It
# runs beside the end-to-end phase at the lowest priority, on the cores that
# phase leaves idle while its real node's containers start, in a process
# group of its own whose priority is restored when the phase ends (as root;
# on a machine busy with other work it would otherwise hardly run).
conformance_log=$(mktemp)
(cd flowcontrol/conformance && CGO_ENABLED=0 exec setsid nice -n 19 go test -mod=mod -count=1 -trimpath -timeout 20m ./...) >"$conformance_log" 2>&1 &
conformance_pid=$!
trap 'kill -- -"$conformance_pid" 2>/dev/null || true; report' EXIT # an interrupted run leaves none of it behind
# Static, as the programs and images these tests build (localtest.Program,
# the worker images, the Dockerfile's build) and the kube build: one compile
# of each package serves them all.
e2e_status=0
phase "go test end-to-end" env CGO_ENABLED=0 go test -o "$bins/static/" "${flags[@]}" $(ordered -E "$end2end") || e2e_status=$?
renice -n 0 -g "$conformance_pid" >/dev/null 2>&1 || true
conformance_status=0
phase "conformance's rest" wait "$conformance_pid" || conformance_status=$?
cat "$conformance_log"
rm -f "$conformance_log"
[ "$e2e_status" -eq 0 ] && exit "$conformance_status"
exit "$e2e_status"
