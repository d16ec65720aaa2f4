#!/usr/bin/env bash
# Run every fuzz target in turn for FUZZTIME each (Go fuzzes one target per
# package per run), print a summary, and fail if any target finds an input
# that breaks it. A finding is written by Go under the package's
# testdata/fuzz/<Target>/: commit it with the fix, as a regression seed.
#
#   integration/scripts/fuzz.sh                              # every target, 10s each
#   FUZZTIME=5m FUZZ_PARALLEL=1 integration/scripts/fuzz.sh FuzzLoad FuzzDecode
#
# FUZZTIME is go test's -fuzztime (a duration, or Nx for N executions);
# FUZZ_PARALLEL is its -parallel (default: GOMAXPROCS); FUZZMINIMIZETIME is
# its -fuzzminimizetime (default here 10s). docs/fuzzing.md
# describes the targets and their properties.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS="${GOFLAGS:--buildvcs=false}"

fuzztime="${FUZZTIME:-10s}"
# Go minimizes every new interesting input for up to 60s by default, which
# would eat a short run; a failing input is still minimized within this.
flags=(-vet=off -run '^$' -fuzztime "$fuzztime" -fuzzminimizetime "${FUZZMINIMIZETIME:-10s}")
[ -n "${FUZZ_PARALLEL:-}" ] && flags+=(-parallel "$FUZZ_PARALLEL")

# package directory and target; flowcontrol/conformance is its own module.
targets=(
	"schemas FuzzDuration"
	"schemas FuzzDeadline"
	"bus FuzzDecode"
	"bus FuzzDecodeWorkItem"
	"bus FuzzEncode"
	"stages/manager FuzzParsePace"
	"stages/manager FuzzParseAsperathos"
	"flowcontrol/policy FuzzLoad"
	"flowcontrol/apfhttp FuzzKubeResolver"
	"flowcontrol/apfhttp FuzzResources"
	"flowcontrol/conformance FuzzKubeResolverMatchesKube"
)

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
summary=()
failed=0
start_all=$SECONDS
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
		continue
	fi
	log="$logs/$name.log"
	corpus="$dir/testdata/fuzz/$name"
	echo "== $name ($dir, $fuzztime)"
	start=$SECONDS
	status=ok
	before="$(ls "$corpus" 2>/dev/null || true)"
	if [ "$dir" = flowcontrol/conformance ]; then
		(cd "$dir" && go test -mod=mod "${flags[@]}" -fuzz "^$name\$" .) >"$log" 2>&1 || status=FAIL
	else
		go test "${flags[@]}" -fuzz "^$name\$" "./$dir/" >"$log" 2>&1 || status=FAIL
	fi
	# Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a
	# failure ("context deadline exceeded", golang/go#75804, fixed in Go 1.27)
	# after the fuzzing itself went well. That failure writes no input; a
	# real one always does, so only a run that wrote none and printed nothing
	# but that error is counted as passed.
	if [ "$status" = FAIL ] && [ "$(ls "$corpus" 2>/dev/null || true)" = "$before" ] &&
		[ "$(sed -n "/^--- FAIL: $name /,/^FAIL\$/p" "$log" | sed '1d;$d' | tr -d '[:space:]')" = contextdeadlineexceeded ]; then
		status="ok*"
		echo "   $name: golang/go#75804 at the end of fuzzing (no input written): counted as passed"
	fi
	# The last progress line: "fuzz: elapsed: 10s, execs: 123456 (12345/sec), new interesting: ..."
	# (none when the run ended while gathering the seeds' baseline coverage).
	execs="$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)"
	if [ "$status" = FAIL ]; then
		failed=1
		cat "$log"
	fi
	summary+=("$(printf '%-30s %-4s %12s execs %5ss (with build)' "$name" "$status" "${execs:-0}" "$((SECONDS - start))")")
done

echo "== fuzz summary ($fuzztime per target, $((SECONDS - start_all))s in all)"
printf '%s\n' "${summary[@]}"
if printf '%s\n' "${summary[@]}" | grep -q ' ok\* '; then
	echo 'ok*: fuzzed for the whole time, then hit golang/go#75804 at shutdown (no input written)'
fi
if [ "$failed" -ne 0 ]; then
	echo "fuzz: a target failed; its input is under the package's testdata/fuzz/" >&2
	exit 1
fi
