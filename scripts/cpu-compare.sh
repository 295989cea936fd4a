#!/usr/bin/env bash
# CPU at rest of several vllm_exporter variants and node_exporter side by
# side in one run, against one simulated vLLM (--metrics-version=v1-0.33,
# one model, load generator on): builds compared on the same machine at
# the same time, or one build with a component switched off to see what it
# costs (the difference to the default run).
#
#   scripts/cpu-compare.sh [DURATION_SECONDS] [NAME=BINARY[:ARGS] ...]
#
# Default variants: "defaults=bin/vllm_exporter",
# "no-probes=bin/vllm_exporter:--no-probe.enabled" and
# "unscraped=bin/vllm_exporter" (never scraped: the difference to defaults
# is what serving /metrics costs). A variant named unscraped* is not
# scraped; every other one, and node_exporter, is scraped every
# SCRAPE_INTERVAL seconds. CPU is utime+stime from /proc/PID/stat over the
# run (1 tick = 1/CLK_TCK s: over 300 s one tick is 0.00003 s/s), and the
# same CPU time in nanoseconds from the threads' schedstat, and how often
# the threads were put on a CPU (schedstat's third field: wake-ups, which a
# Go profile does not show). Two variants of the same build (old=...
# old2=...) show how far one run's noise goes.
#
# Environment: SCRAPE_INTERVAL (15), NODE_EXPORTER
# (/usr/bin/prometheus-node-exporter), GOMEMLIMIT (the Dockerfile's),
# BUILD (1: `make build` first).
# Needs: Linux /proc, curl, a free loopback port range (picked at random).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-300}
shift || true
SCRAPE_INTERVAL=${SCRAPE_INTERVAL:-15}
NODE_EXPORTER=${NODE_EXPORTER:-/usr/bin/prometheus-node-exporter}
BUILD=${BUILD:-1}
variants=("$@")
if [ "${#variants[@]}" -eq 0 ]; then
  variants=("defaults=bin/vllm_exporter" "no-probes=bin/vllm_exporter:--no-probe.enabled" "unscraped=bin/vllm_exporter")
fi
SCRIPT=cpu-compare
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
GOMEMLIMIT=${GOMEMLIMIT:-$(image_gomemlimit)}
for tool in curl "$NODE_EXPORTER"; do
  command -v "$tool" >/dev/null || { echo "cpu-compare: $tool not found" >&2; exit 1; }
done
if [ "$BUILD" = 1 ]; then
  make build >/dev/null
fi

base=$((20000 + RANDOM % 20000))
sim_addr=127.0.0.1:$base
bin/vllm-sim --web.listen-address="$sim_addr" --log.level=warn --metrics-version=v1-0.33 >"$work/sim.log" 2>&1 &
pids+=($!)
wait_up "http://$sim_addr/metrics"

names=(); vpids=(); urls=()
port=$((base + 1))
for v in "${variants[@]}"; do
  name=${v%%=*}; spec=${v#*=}
  binary=${spec%%:*}; args=""
  [ "$spec" != "$binary" ] && args=${spec#*:}
  # shellcheck disable=SC2086
  GOMEMLIMIT="$GOMEMLIMIT" "$binary" --web.listen-address="127.0.0.1:$port" --vllm.url="http://$sim_addr" $args \
    >"$work/$name.log" 2>&1 &
  pids+=($!); vpids+=($!); names+=("$name")
  wait_up "http://127.0.0.1:$port/metrics"
  case $name in unscraped*) urls+=("") ;; *) urls+=("http://127.0.0.1:$port/metrics") ;; esac
  port=$((port + 1))
done
"$NODE_EXPORTER" --web.listen-address="127.0.0.1:$port" >"$work/node.log" 2>&1 &
pids+=($!); vpids+=($!); names+=("node_exporter"); urls+=("http://127.0.0.1:$port/metrics")
wait_up "http://127.0.0.1:$port/metrics"
sleep 10

t0=(); n0=(); r0=(); for p in "${vpids[@]}"; do t0+=("$(cpu_ticks "$p")"); n0+=("$(cpu_ns "$p")"); r0+=("$(cpu_runs "$p")"); done
w0=$(now)
declare -a anon_sum; samples=0
for ((s = 0; s < DURATION; s += SCRAPE_INTERVAL)); do
  for u in "${urls[@]}"; do
    [ -n "$u" ] && curl -fsS -o /dev/null "$u"
  done
  sleep "$SCRAPE_INTERVAL"
  for i in "${!vpids[@]}"; do anon_sum[i]=$(( ${anon_sum[i]:-0} + $(rss_anon_kib "${vpids[$i]}") )); done
  samples=$((samples + 1))
done
w1=$(now)
printf "CPU at rest over %.0fs, side by side against vllm-sim (v1-0.33, one model), scraped every %ss\n\n" "$(echo "$w1 - $w0" | bc)" "$SCRAPE_INTERVAL"
node_ticks=$(( $(cpu_ticks "${vpids[-1]}") - ${t0[-1]} ))
node_ns=$(( $(cpu_ns "${vpids[-1]}") - ${n0[-1]} ))
printf "%-20s %8s %12s %10s %12s %10s %10s %12s %8s\n" "variant" "ticks" "CPU s/s" "vs node" "CPU ms (ns)" "vs node" "wakeups/s" "RssAnon MiB" "vs node"
for i in "${!names[@]}"; do
  ticks=$(( $(cpu_ticks "${vpids[$i]}") - ${t0[$i]} ))
  ns=$(( $(cpu_ns "${vpids[$i]}") - ${n0[$i]} ))
  runs=$(( $(cpu_runs "${vpids[$i]}") - ${r0[$i]} ))
  awk -v r="$runs" -v a="$(( ${anon_sum[$i]} / samples ))" -v na="$(( ${anon_sum[-1]} / samples ))" -v n="${names[$i]}" -v t="$ticks" -v nt="$node_ticks" -v clk="$clk" -v w="$(echo "$w1 - $w0" | bc)" -v ns="$ns" -v nn="$node_ns" \
    'BEGIN {printf "%-20s %8d %12.5f %10.2f %12.1f %10.2f %10.1f %12.2f %8.2f\n", n, t, t / clk / w, (nt > 0 ? t / nt : 0), ns / 1e6, (nn > 0 ? ns / nn : 0), r / w, a / 1024, (na > 0 ? a / na : 0)}'
done
echo
echo "ticks: utime+stime from /proc/PID/stat (1/$clk s each); CPU ms (ns): the same CPU time from"
echo "/proc/PID/task/*/schedstat in nanoseconds, the finer figure for differences of a few ticks;"
echo "wakeups/s: times its threads were put on a CPU (schedstat's third field), per second;"
echo "RssAnon: /proc/PID/status, sampled after each scrape interval and averaged."
