# Shared helpers of the benchmark scripts (sourced, not run). The caller
# sets SCRIPT (its name, for messages); lib.sh creates $work (removed on
# exit) and kills every pid the caller appends to the pids array.
# shellcheck shell=bash

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

clk=$(getconf CLK_TCK)
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
rss_anon_kib() { awk '/^RssAnon:/ {print $2}' "/proc/$1/status"; }
rss_file_kib() { awk '/^RssFile:/ {print $2}' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# cpu_ns PID: nanoseconds on CPU, summed over the process's live threads
# (/proc/PID/task/*/schedstat): the same CPU time as cpu_ticks, without the
# 10 ms tick (Go's threads live as long as the process).
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'; }
# cpu_runs PID: how many times the process's threads were put on a CPU
# (the third field of schedstat): its wake-ups, the cost that does not show
# as work in a profile (scheduler and sysmon time around each one).
cpu_runs() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $3} END {printf "%d\n", s}'; }
now() { date +%s.%N; }

# wait_up URL: poll until URL answers 2xx (30 s at most).
wait_up() {
  for _ in $(seq 1 150); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "$SCRIPT: $1 never came up" >&2
  tail -20 "$work"/*.log >&2
  exit 1
}

# metric NAME URL: the first sample of NAME in URL's exposition.
metric() { curl -fsS "$2" 2>/dev/null | awk -v n="$1" '$1 == n && !done {print $2; done = 1}'; }

# image_gomemlimit: the GOMEMLIMIT the Dockerfile ships.
image_gomemlimit() { sed -n 's/.*GOMEMLIMIT=\([0-9A-Za-z]*\).*/\1/p' Dockerfile | head -1; }
