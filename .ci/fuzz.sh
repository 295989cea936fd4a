#!/usr/bin/env bash
# Runs every native fuzz target for a bounded time and prints how many
# inputs each executed. Crashers land in testdata/fuzz/ and become
# regression cases of the plain `go test` run.
#
# The go command minimizes every new "interesting" input by re-running it
# for up to -fuzzminimizetime (default 60s). With that default the budget
# goes to minimization (FuzzScrape ran ~54 inputs in 20 s); a cap of a few
# runs per attempt (10x) leaves it to fuzzing. A target that still executes
# fewer than FUZZ_MIN_EXECS inputs fails the run: it is not fuzzing.
set -euo pipefail
t=${1:-20s}
minimize=${FUZZMINIMIZETIME:-10x}
min_execs=${FUZZ_MIN_EXECS:-1000}
summary=()
failed=0

# deadline_race LOG: the run failed only with the fuzz coordinator's
# deadline race: "context deadline exceeded", and no failing input, panic,
# or test error line.
deadline_race() {
  grep -q '^    context deadline exceeded$' "$1" &&
    ! grep -qE 'Failing input written to|^panic:|_test\.go:[0-9]+:' "$1"
}
# fuzz_target PKG F LOG: runs one target for $t, its output shown and kept
# in LOG; returns go test's status (pipefail).
fuzz_target() {
  go test -run '^$' -fuzz "^${2}\$" -fuzztime "$t" -fuzzminimizetime "$minimize" "$1" 2>&1 | tee "$3"
}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    echo "fuzz $pkg $f ($t, minimize $minimize)"
    log=$(mktemp)
    rc=0
    fuzz_target "$pkg" "$f" "$log" || rc=$?
    # Go before 1.27 can fail a target at the -fuzztime deadline with a
    # bare "context deadline exceeded" when a worker is still mid-input on
    # a loaded machine (go.dev/issue/75804, a race in the fuzz coordinator).
    # That failure writes no failing
    # input and prints no panic or test error; it alone is retried, once.
    # A real finding writes "Failing input written to" and fails at once.
    retried=""
    if [ "$rc" -ne 0 ] && deadline_race "$log"; then
      echo "fuzz $pkg $f: bare 'context deadline exceeded' with no failing input (go.dev/issue/75804); running it again once"
      retried=" (retried once: Go fuzz deadline race)"
      rc=0
      fuzz_target "$pkg" "$f" "$log" || rc=$?
    fi
    # The last progress line carries the total: "fuzz: elapsed: 15s, execs: 14258 (0/sec), ...".
    # A target that fails on its seed corpus prints none (and must still
    # reach the summary).
    execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
    rm -f "$log"
    execs=${execs:-0}
    status=ok
    if [ "$rc" -ne 0 ]; then
      status=FAIL
    elif [ "$execs" -lt "$min_execs" ]; then
      status="FAIL (fewer than $min_execs execs)"
      rc=1
    fi
    [ "$rc" -eq 0 ] || failed=1
    summary+=("$(printf '%-18s %-14s %9s execs  %s' "${pkg#github.com/vllm-exporter/vllm_exporter/}" "$f" "$execs" "$status$retried")")
  done
done
echo
echo "fuzz summary ($t per target):"
printf '  %s\n' "${summary[@]}"
exit "$failed"
