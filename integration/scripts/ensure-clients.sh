#!/usr/bin/env bash
# ensure-clients.sh: install the non-Go clients that docs/clients.md's
# examples run with (docs/docs_test.go runs them): the NATS CLI, built from
# the Go module proxy, and the nats.js packages of examples/clients/node,
# installed with npm ci from its package-lock.json. Both go under
# $PACE_TOOLS (default ~/.cache/pace-tools), where the docs test finds them;
# each is skipped when already there (the CLI by version, the packages while
# the lock file is unchanged).
set -euo pipefail
cd "$(dirname "$0")/../.."
tools=${PACE_TOOLS:-$HOME/.cache/pace-tools}
natscli=v0.5.0 # keep in step with natsCLIVersion in docs/docs_test.go
mkdir -p "$tools"

dir=$tools/natscli-$natscli
if [ ! -x "$dir/nats" ]; then
  echo "building the NATS CLI $natscli (once, about a minute)" >&2
  GOBIN=$dir GOFLAGS=-buildvcs=false go install "github.com/nats-io/natscli/nats@$natscli"
fi

# node_modules is made in a scratch directory and moved into place whole,
# and the lock file copied last: it is the stamp the docs test compares.
node=$tools/node-clients
lock=examples/clients/node/package-lock.json
if ! cmp -s "$lock" "$node/package-lock.json" || [ ! -d "$node/node_modules" ]; then
  command -v npm >/dev/null || { echo "npm is missing: install Node.js 20 or later with npm" >&2; exit 1; }
  echo "installing examples/clients/node's packages with npm ci" >&2
  scratch=$(mktemp -d "${tools}/node-clients.XXXXXX")
  trap 'rm -rf "$scratch"' EXIT # also when npm ci fails
  cp examples/clients/node/package.json "$lock" "$scratch/"
  (cd "$scratch" && npm ci --no-audit --no-fund --loglevel=error >&2)
  rm -rf "$node"
  mkdir -p "$node"
  mv "$scratch/node_modules" "$node/"
  cp examples/clients/node/package.json "$node/"
  cp "$lock" "$node/package-lock.json"
fi
