#!/usr/bin/env bash
# Runs every native fuzz target for a bounded time. Crashers land in
# testdata/fuzz/ and become regression cases of the plain `go test` run.
set -euo pipefail
t=${1:-20s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    echo "fuzz $pkg $f ($t)"
    go test -run '^$' -fuzz "^${f}\$" -fuzztime "$t" -fuzzminimizetime "${FUZZMINIMIZETIME:-5s}" "$pkg"
  done
done
