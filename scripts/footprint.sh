#!/usr/bin/env bash
# Footprint benchmark: vllm_exporter with default flags against the simulated
# vLLM (vllm-sim with its load generator, today's /metrics layout:
# --metrics-version=v1-0.33, one model), side by side in the same run with
# Debian's prometheus-node-exporter as the reference sidecar.
#
#   scripts/footprint.sh [DURATION_SECONDS]        (default 180)
#
# Phase 1 (DURATION): both exporters are scraped every SCRAPE_INTERVAL seconds
# as Prometheus would; VmRSS and RssAnon (the anonymous part: heap, stacks;
# what the process costs, whatever the kernel does with file-backed pages)
# are sampled every second from /proc/PID/status, the Go heap in use and
# go_goroutines are read from every scrape (the goroutines' range in each
# half of the run shows whether they grow), and CPU seconds (utime+stime
# from /proc/PID/stat) are divided by wall seconds. The samples on each
# /metrics are counted, and vLLM's own body beside them.
# Phase 2: wrk with WRK_CONNECTIONS connections against each /metrics in turn
# for WRK_DURATION, reporting p99 latency and requests/s.
#
# Phase 3: the same with WRK_LOW_CONNECTIONS (8, 0 = skip): under both
# exporters' in-flight limits, so no answer is a load-shedding 503.
# WRK_CONNECTIONS=0 skips phases 2 and 3 (and the need for wrk): the
# at-rest figures alone.
#
# Environment: SCRAPE_INTERVAL (15), WRK_CONNECTIONS (50), WRK_THREADS (2),
# WRK_DURATION (30s), WRK_LOW_CONNECTIONS (8), NODE_EXPORTER (/usr/bin/prometheus-node-exporter),
# BUILD (1: run `make build` first; 0: use bin/ as is), SIM_ARGS (extra
# vllm-sim flags), EXPORTER_ARGS (extra vllm_exporter flags).
# Needs: Linux /proc, curl, wrk, a free loopback port range (picked at random).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-180}
SCRAPE_INTERVAL=${SCRAPE_INTERVAL:-15}
WRK_CONNECTIONS=${WRK_CONNECTIONS:-50}
WRK_THREADS=${WRK_THREADS:-2}
WRK_DURATION=${WRK_DURATION:-30s}
WRK_LOW_CONNECTIONS=${WRK_LOW_CONNECTIONS:-8}
NODE_EXPORTER=${NODE_EXPORTER:-/usr/bin/prometheus-node-exporter}
BUILD=${BUILD:-1}

tools=(curl "$NODE_EXPORTER")
[ "$WRK_CONNECTIONS" -gt 0 ] && tools+=(wrk)
for tool in "${tools[@]}"; do
  command -v "$tool" >/dev/null || { echo "footprint: $tool not found" >&2; exit 1; }
done
if [ "$BUILD" = 1 ]; then
  make build >/dev/null
fi

base=$((20000 + RANDOM % 20000))
SIM_ADDR=127.0.0.1:$base
EXP_ADDR=127.0.0.1:$((base + 1))
NODE_ADDR=127.0.0.1:$((base + 2))
SCRIPT=footprint
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# The exporter runs as the image runs it.
GOMEMLIMIT=${GOMEMLIMIT:-$(image_gomemlimit)}

# shellcheck disable=SC2086
bin/vllm-sim --web.listen-address="$SIM_ADDR" --log.level=warn ${SIM_ARGS:---metrics-version=v1-0.33} >"$work/sim.log" 2>&1 &
pids+=($!)
# shellcheck disable=SC2086
GOMEMLIMIT="$GOMEMLIMIT" bin/vllm_exporter --web.listen-address="$EXP_ADDR" --vllm.url="http://$SIM_ADDR" ${EXPORTER_ARGS:-} >"$work/exporter.log" 2>&1 &
exp_pid=$!
pids+=($exp_pid)
"$NODE_EXPORTER" --web.listen-address="$NODE_ADDR" >"$work/node.log" 2>&1 &
node_pid=$!
pids+=($node_pid)

wait_up "http://$SIM_ADDR/metrics"
wait_up "http://$EXP_ADDR/metrics"
wait_up "http://$NODE_ADDR/metrics"
# Let the exporter fill its windows a little and both settle.
sleep 10


echo "phase 1: ${DURATION}s steady state, both scraped every ${SCRAPE_INTERVAL}s" >&2
e_cpu0=$(cpu_ticks $exp_pid); n_cpu0=$(cpu_ticks $node_pid); t0=$(now)
e_rss_sum=0; n_rss_sum=0; e_rss_max=0; n_rss_max=0; samples=0; next_scrape=0
e_anon_sum=0; n_anon_sum=0; e_file_sum=0; n_file_sum=0; e_anon_max=0; n_anon_max=0
e_heap_sum=0; n_heap_sum=0; heap_samples=0
# Goroutines are read from every scrape's own answer, per half of the run:
# a leak shows as a higher range in the second half. In-flight probe
# requests and keep-alive connections make them move by a few.
e_gr=(); n_gr=()
goroutines() { awk '$1 == "go_goroutines" {print $2; exit}' "$1"; }
# heap_bytes FILE: the Go heap in use (memstats' HeapInuse; without
# go_memstats_* it is the sum of the two runtime/metrics classes that make it).
heap_bytes() {
  awk '$1 == "go_memstats_heap_inuse_bytes" {m = $2} $1 ~ /^go_memory_classes_heap_(objects|unused)_bytes$/ {c += $2}
    END {printf "%.0f", (m != "" ? m : c)}' "$1"
}
for ((s = 0; s < DURATION; s++)); do
  if [ "$s" -ge "$next_scrape" ]; then
    curl -fsS -o "$work/exp-scrape.txt" "http://$EXP_ADDR/metrics"
    curl -fsS -o "$work/node-scrape.txt" "http://$NODE_ADDR/metrics"
    half=$((2 * s / DURATION))
    e_gr+=("$half $(goroutines "$work/exp-scrape.txt")")
    n_gr+=("$half $(goroutines "$work/node-scrape.txt")")
    e_heap_sum=$((e_heap_sum + $(heap_bytes "$work/exp-scrape.txt"))); n_heap_sum=$((n_heap_sum + $(heap_bytes "$work/node-scrape.txt")))
    heap_samples=$((heap_samples + 1))
    next_scrape=$((s + SCRAPE_INTERVAL))
  fi
  e=$(rss_kib $exp_pid); n=$(rss_kib $node_pid)
  e_rss_sum=$((e_rss_sum + e)); n_rss_sum=$((n_rss_sum + n)); samples=$((samples + 1))
  ea=$(rss_anon_kib $exp_pid); na=$(rss_anon_kib $node_pid)
  e_anon_sum=$((e_anon_sum + ea)); n_anon_sum=$((n_anon_sum + na))
  [ "$ea" -gt "$e_anon_max" ] && e_anon_max=$ea
  [ "$na" -gt "$n_anon_max" ] && n_anon_max=$na
  e_file_sum=$((e_file_sum + $(rss_file_kib $exp_pid))); n_file_sum=$((n_file_sum + $(rss_file_kib $node_pid)))
  [ "$e" -gt "$e_rss_max" ] && e_rss_max=$e
  [ "$n" -gt "$n_rss_max" ] && n_rss_max=$n
  sleep 1
done
e_cpu1=$(cpu_ticks $exp_pid); n_cpu1=$(cpu_ticks $node_pid); t1=$(now)
# gr_range HALF SAMPLES...: "min-max" of the goroutine counts in that half.
gr_range() {
  local h=$1; shift
  printf '%s\n' "$@" | awk -v h="$h" '$1 == h {if (min == "" || $2 < min) min = $2; if ($2 > max) max = $2} END {printf "%s-%s", min, max}'
}
e_gr_first=$(gr_range 0 "${e_gr[@]}"); e_gr_second=$(gr_range 1 "${e_gr[@]}")
n_gr_first=$(gr_range 0 "${n_gr[@]}"); n_gr_second=$(gr_range 1 "${n_gr[@]}")

exp_series=$(curl -fsS "http://$EXP_ADDR/metrics" | grep -vc '^#')
vllm_series=$(curl -fsS "http://$SIM_ADDR/metrics" | grep -vc '^#')
node_series=$(curl -fsS "http://$NODE_ADDR/metrics" | grep -vc '^#')
exp_bytes=$(curl -fsS "http://$EXP_ADDR/metrics" | wc -c)
node_bytes=$(curl -fsS "http://$NODE_ADDR/metrics" | wc -c)

# wrk prints "99%  1.23ms"; convert to milliseconds.
p99_ms() {
  [ -f "$1" ] || { echo 0; return; }
  awk '$1 == "99%" {v = $2; u = v; gsub(/[0-9.]/, "", u); gsub(/[a-z]/, "", v);
    f = (u == "us") ? 0.001 : (u == "s") ? 1000 : (u == "m") ? 60000 : 1; printf "%.2f", v * f}' "$1"
}
rps() { [ -f "$1" ] || { echo 0; return; }; awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$1"; }
# Share of answers that were not 2xx/3xx (both exporters shed load beyond
# their in-flight limit with 503: ours at 10, node_exporter at 40).
non2xx() { [ -f "$1" ] || { echo 0; return; }; awk '/requests in/ {n = $1} /Non-2xx/ {b = $NF} END {printf "%.3f", (n > 0 ? b / n : 0)}' "$1"; }

e_wrk_cpu0=0; e_wrk_cpu1=0; n_wrk_cpu0=0; n_wrk_cpu1=0; e_wrk_rss=0; n_wrk_rss=0
if [ "$WRK_CONNECTIONS" -gt 0 ]; then
echo "phase 2: wrk -t$WRK_THREADS -c$WRK_CONNECTIONS -d$WRK_DURATION against each /metrics" >&2
e_wrk_cpu0=$(cpu_ticks $exp_pid)
wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"$WRK_DURATION" --latency "http://$EXP_ADDR/metrics" >"$work/wrk-exp.txt"
e_wrk_cpu1=$(cpu_ticks $exp_pid); e_wrk_rss=$(rss_kib $exp_pid)
n_wrk_cpu0=$(cpu_ticks $node_pid)
wrk -t"$WRK_THREADS" -c"$WRK_CONNECTIONS" -d"$WRK_DURATION" --latency "http://$NODE_ADDR/metrics" >"$work/wrk-node.txt"
n_wrk_cpu1=$(cpu_ticks $node_pid); n_wrk_rss=$(rss_kib $node_pid)
# The same under both in-flight limits, so every answer is a real scrape.
if [ "$WRK_LOW_CONNECTIONS" -gt 0 ]; then
  echo "phase 3: wrk -c$WRK_LOW_CONNECTIONS (under both exporters' in-flight limits)" >&2
  wrk -t"$WRK_THREADS" -c"$WRK_LOW_CONNECTIONS" -d"$WRK_DURATION" --latency "http://$EXP_ADDR/metrics" >"$work/wrk-exp-low.txt"
  wrk -t"$WRK_THREADS" -c"$WRK_LOW_CONNECTIONS" -d"$WRK_DURATION" --latency "http://$NODE_ADDR/metrics" >"$work/wrk-node-low.txt"
fi
for f in wrk-exp wrk-node wrk-exp-low wrk-node-low; do
  [ -f "$work/$f.txt" ] || continue
  if grep -q "Socket errors" "$work/$f.txt"; then
    echo "footprint: $f: $(grep 'Socket errors' "$work/$f.txt")" >&2
  fi
done

fi
awk -v d="$DURATION" -v wall="$(echo "$t1 - $t0" | bc)" -v clk="$clk" \
  -v ec0="$e_cpu0" -v ec1="$e_cpu1" -v nc0="$n_cpu0" -v nc1="$n_cpu1" \
  -v ers="$e_rss_sum" -v nrs="$n_rss_sum" -v n="$samples" -v erm="$e_rss_max" -v nrm="$n_rss_max" \
  -v es="$exp_series" -v ns="$node_series" -v eb="$exp_bytes" -v nb="$node_bytes" \
  -v ep99="$(p99_ms "$work/wrk-exp.txt")" -v np99="$(p99_ms "$work/wrk-node.txt")" \
  -v erps="$(rps "$work/wrk-exp.txt")" -v nrps="$(rps "$work/wrk-node.txt")" \
  -v e5="$(non2xx "$work/wrk-exp.txt")" -v n5="$(non2xx "$work/wrk-node.txt")" \
  -v ewc="$((e_wrk_cpu1 - e_wrk_cpu0))" -v nwc="$((n_wrk_cpu1 - n_wrk_cpu0))" \
  -v lc="$WRK_LOW_CONNECTIONS" -v elp99="$([ -f "$work/wrk-exp-low.txt" ] && p99_ms "$work/wrk-exp-low.txt" || echo 0)" \
  -v nlp99="$([ -f "$work/wrk-node-low.txt" ] && p99_ms "$work/wrk-node-low.txt" || echo 0)" \
  -v elrps="$([ -f "$work/wrk-exp-low.txt" ] && rps "$work/wrk-exp-low.txt" || echo 0)" \
  -v nlrps="$([ -f "$work/wrk-node-low.txt" ] && rps "$work/wrk-node-low.txt" || echo 0)" \
  -v eg0="$e_gr_first" -v eg1="$e_gr_second" -v ng0="$n_gr_first" -v ng1="$n_gr_second" -v gml="${GOMEMLIMIT:-unset}" \
  -v eas="$e_anon_sum" -v nas="$n_anon_sum" -v efs="$e_file_sum" -v nfs="$n_file_sum" \
  -v eam="$e_anon_max" -v nam="$n_anon_max" -v ehs="$e_heap_sum" -v nhs="$n_heap_sum" -v hn="$heap_samples" -v vs="$vllm_series" \
  -v ewr="$e_wrk_rss" -v nwr="$n_wrk_rss" -v conns="$WRK_CONNECTIONS" -v si="$SCRAPE_INTERVAL" 'BEGIN {
  ecpu = (ec1 - ec0) / clk / wall; ncpu = (nc1 - nc0) / clk / wall
  printf "footprint over %.0fs wall, both scraped every %ss (vllm_exporter defaults with the image'"'"'s GOMEMLIMIT=%s, vllm-sim load generator)\n\n", wall, si, gml
  printf "%-38s %16s %16s %10s\n", "", "vllm_exporter", "node_exporter", "ratio"
  printf "%-38s %16.5f %16.5f %10.2f\n", "CPU seconds per wall second", ecpu, ncpu, (ncpu > 0 ? ecpu / ncpu : 0)
  printf "%-38s %16.1f %16.1f %10.2f\n", "RssAnon average (MiB: heap, stacks)", eas / n / 1024, nas / n / 1024, (nas > 0 ? eas / nas : 0)
  printf "%-38s %16.1f %16.1f %10.2f\n", "RssAnon max (MiB)", eam / 1024, nam / 1024, (nam > 0 ? eam / nam : 0)
  printf "%-38s %16.1f %16.1f %10.2f\n", "Go heap in use, average (MiB)", ehs / hn / 1048576, nhs / hn / 1048576, (nhs > 0 ? ehs / nhs : 0)
  printf "%-38s %16.1f %16.1f %10.2f\n", "VmRSS average (MiB)", ers / n / 1024, nrs / n / 1024, (ers / n) / (nrs / n)
  printf "%-38s %16.1f %16.1f %10.2f\n", "  of which file-backed (binary, libc)", efs / n / 1024, nfs / n / 1024, (nfs > 0 ? efs / nfs : 0)
  printf "%-38s %16.1f %16.1f %10.2f\n", "VmRSS max (MiB)", erm / 1024, nrm / 1024, erm / nrm
  printf "%-38s %16s %16s %10s\n", "goroutines, 1st half -> 2nd half", eg0 " -> " eg1, ng0 " -> " ng1, "-"
  printf "%-38s %16d %16d %10.2f\n", "/metrics samples", es, ns, es / ns
  printf "%-38s %16d %16d %10.2f\n", "/metrics samples vs vLLM'"'"'s own body", es, vs, es / vs
  printf "%-38s %16d %16d %10.2f\n", "/metrics bytes", eb, nb, eb / nb
  if (conns > 0) {
    printf "%-38s %16.2f %16.2f %10.2f\n", "wrk -c" conns " p99 latency (ms)", ep99, np99, (np99 > 0 ? ep99 / np99 : 0)
    printf "%-38s %16d %16d %10.2f\n", "wrk -c" conns " requests/s", erps, nrps, (nrps > 0 ? erps / nrps : 0)
    printf "%-38s %16.3f %16.3f %10s\n", "wrk share of non-2xx (503 load shed)", e5, n5, "-"
  }
  if (conns > 0 && lc > 0) {
    printf "%-38s %16.2f %16.2f %10.2f\n", "wrk -c" lc " p99 latency (ms)", elp99, nlp99, (nlp99 > 0 ? elp99 / nlp99 : 0)
    printf "%-38s %16d %16d %10.2f\n", "wrk -c" lc " requests/s", elrps, nlrps, (nlrps > 0 ? elrps / nlrps : 0)
  }
  if (conns > 0) {
    printf "%-38s %16.1f %16.1f %10.2f\n", "CPU seconds during wrk -c" conns, ewc / clk, nwc / clk, (nwc > 0 ? ewc / nwc : 0)
    printf "%-38s %16.1f %16.1f %10.2f\n", "VmRSS after wrk (MiB)", ewr / 1024, nwr / 1024, (nwr > 0 ? ewr / nwr : 0)
  }
}'
