#!/usr/bin/env bash
# Runs the whole test suite (the README's test command, `make test`) RUNS
# times in a row while every core is kept busy, and reports pass/fail per
# run. A CI machine is small and shared: a test that only passes on an idle
# machine fails there sooner or later.
#
#   scripts/test-under-load.sh            # 3 runs, one CPU hog per core
#   RUNS=1 LOAD=4 scripts/test-under-load.sh
#   TEST_CMD='go test -count=1 ./probes/...' scripts/test-under-load.sh
#
# The load is Debian's stress-ng (--cpu) when installed, else `yes`
# processes. The hogs run at normal priority (a niced hog would yield to
# the tests and prove nothing) and are killed on exit, however the script
# ends. Each run's output is kept under $LOGDIR (default: a temp dir).
set -uo pipefail
cd "$(dirname "$0")/.."

runs=${RUNS:-3}
load=${LOAD:-$(nproc)}
test_cmd=${TEST_CMD:-make test}
logdir=${LOGDIR:-$(mktemp -d -t test-under-load.XXXXXX)}
mkdir -p "$logdir"

# Job control: every background job (hogs, the test run) gets its own
# process group, so a signal can end a run with everything it started.
set -m
hogs=()
testpid=
stop_load() {
  if [ -n "$testpid" ]; then
    kill -- "-$testpid" 2>/dev/null || true
  fi
  for p in "${hogs[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  for p in "${hogs[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  hogs=()
}
trap stop_load EXIT
trap 'exit 130' INT TERM

if command -v stress-ng >/dev/null; then
  stress-ng --cpu "$load" --quiet &
  hogs+=($!)
  echo "load: stress-ng --cpu $load (pid ${hogs[*]})"
else
  for _ in $(seq "$load"); do
    yes >/dev/null &
    hogs+=($!)
  done
  echo "load: $load x yes (pids ${hogs[*]})"
fi

results=()
failed=0
for i in $(seq "$runs"); do
  log="$logdir/run-$i.log"
  start=$(date +%s)
  echo "run $i/$runs: $test_cmd (load average $(cut -d' ' -f1-3 /proc/loadavg)) -> $log"
  bash -c "$test_cmd" >"$log" 2>&1 &
  testpid=$!
  if wait "$testpid"; then
    status=PASS
  else
    status=FAIL
    failed=1
  fi
  testpid=
  secs=$(($(date +%s) - start))
  results+=("run $i: $status in ${secs}s (load average at end $(cut -d' ' -f1-3 /proc/loadavg))")
  echo "${results[-1]}"
  if [ "$status" = FAIL ]; then
    grep -E '^(--- FAIL|FAIL|panic:)' "$log" | head -20 | sed 's/^/    /'
  fi
done

stop_load
echo
echo "test-under-load summary ($runs runs of '$test_cmd', $load CPU hogs, logs in $logdir):"
printf '  %s\n' "${results[@]}"
exit "$failed"
