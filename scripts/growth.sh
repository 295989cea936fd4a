#!/usr/bin/env bash
# Growth benchmark: vllm_exporter at default flags against the simulated
# vLLM at a large deployment (16 models x 8 data-parallel engines by
# default), printing what "scales without a cliff" means as figures:
#
#   - RssAnon (anonymous memory: heap, stacks; /proc/PID/status) at minute
#     1, minute 5 and at the end, the change from minute 5 to the end, and
#     the band of every sample after minute 5 around minute 5's (flat: all
#     within 10 %), and those samples' 5th percentile, median and 95th
#     percentile (the level and spread, which one sample at minute 5 does
#     not show);
#   - the Go heap in use (go_memory_classes_heap_{objects,unused}_bytes)
#     at its peak and on average, against the image's GOMEMLIMIT;
#   - the scrape cycle (vllm_exporter_scrape_duration_seconds: fetch,
#     scan, normalize, derive), median and longest;
#   - CPU seconds per second and the goroutine count (first and last);
#   - the trend: RssAnon at the end of each 5 minutes and the largest heap
#     in use within them, so a level still being reached shows as such;
#   - the bytes one scrape allocates against the body's size and its time,
#     from collector/vllm's BenchmarkScrape run on a body of the same
#     simulator (needs the Go toolchain; SKIP_BENCH=1 leaves it out).
#
#   scripts/growth.sh [MINUTES] [NAME=BINARY ...]
#
# MINUTES defaults to GROWTH_MINUTES, else 30. With builds named
# (old=/tmp/old/vllm_exporter new=bin/vllm_exporter), they run side by side
# against one simulator per size, each read at the same moments: where the
# Go collector's cycles fall moves RssAnon by a few MiB from sample to
# sample, so two builds are compared in one run, on one input, and by
# their spread as much as by one sample. Without, bin/vllm_exporter runs
# alone. A build may carry flags or an environment (words split at blanks):
#   scripts/growth.sh 30 defaults=bin/vllm_exporter \
#     "windows1m=bin/vllm_exporter --vllm.windows=1m" "gogc50=env GOGC=50 bin/vllm_exporter"
#
# A short local run: GROWTH_MINUTES=6 scripts/growth.sh (minute 5 and the
# end are then one minute apart: it shows the level, not the trend).
#
# Environment: GROWTH_MINUTES (30), SIZES ("16x8"; e.g. "1x1 8x8 16x8"),
# SAMPLE (10: seconds between samples), GOMEMLIMIT (the Dockerfile's),
# BUILD (1: `make build` first; 0: use bin/ as is), EXPORTER_ARGS,
# SKIP_BENCH.
# Needs: Linux /proc, curl, awk, a free loopback port range (picked at random).
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES=${1:-${GROWTH_MINUTES:-30}}
shift || true
variants=("$@")
if [ "${#variants[@]}" -eq 0 ]; then
  variants=("exporter=bin/vllm_exporter")
fi
DURATION=$((MINUTES * 60))
SIZES=${SIZES:-"16x8"}
SAMPLE=${SAMPLE:-10}
BUILD=${BUILD:-1}
SKIP_BENCH=${SKIP_BENCH:-0}
SCRIPT=growth
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
GOMEMLIMIT=${GOMEMLIMIT:-$(image_gomemlimit)}

command -v curl >/dev/null || { echo "growth: curl not found" >&2; exit 1; }
if [ "$BUILD" = 1 ]; then
  make build >/dev/null
fi

# to_bytes 40MiB: GOMEMLIMIT's value in bytes (0 when unset).
to_bytes() {
  awk -v v="$1" 'BEGIN { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    m = (u == "KiB") ? 1024 : (u == "MiB") ? 1048576 : (u == "GiB") ? 1073741824 : 1
    printf "%.0f", n * m }'
}
limit_bytes=$(to_bytes "${GOMEMLIMIT:-0}")

# percentiles P...: the P-quantiles (0 <= P <= 1; the sample at rank
# int(P * (n - 1)) + 1 of n sorted) of the numbers on stdin, on one line;
# nothing for no input. The spread and the level's median read it alike.
percentiles() {
  sort -n | awk -v ps="$*" 'BEGIN {n = split(ps, p, " ")} {v[NR] = $1}
    END {if (NR) for (i = 1; i <= n; i++) printf "%s%s", v[int(p[i] * (NR - 1)) + 1], (i < n ? " " : "\n")}'
}

# scrape_values FILE: "heap_bytes scrape_seconds goroutines" from one /metrics body.
scrape_values() {
  awk '$1 ~ /^go_memory_classes_heap_(objects|unused)_bytes$/ {h += $2}
    $1 == "vllm_exporter_scrape_duration_seconds" {d = $2}
    $1 == "go_goroutines" {g = $2}
    END {printf "%.0f %s %s\n", h, (d == "" ? 0 : d), (g == "" ? 0 : g)}' "$1"
}

echo "growth: ${MINUTES} min per size, sizes: $SIZES, GOMEMLIMIT=${GOMEMLIMIT:-unset}" >&2
rows=()
trends=()
bench_rows=()
for size in $SIZES; do
  models=${size%x*}
  engines=${size#*x}
  base=$((20000 + RANDOM % 20000))
  sim_addr=127.0.0.1:$base
  names=()
  for ((m = 0; m < models; m++)); do names+=("--served-model-name=model-$m"); done
  bin/vllm-sim --web.listen-address="$sim_addr" --log.level=warn "${names[@]}" \
    --data-parallel-size="$engines" >"$work/sim-$size.log" 2>&1 &
  sim_pid=$!
  pids+=("$sim_pid")
  wait_up "http://$sim_addr/metrics"
  curl -fsS -o "$work/body-$size.txt" "http://$sim_addr/metrics"
  body=$(wc -c <"$work/body-$size.txt")
  vnames=(); vpids=(); vaddrs=(); cpu0=(); g_first=()
  port=$((base + 1))
  for v in "${variants[@]}"; do
    name=${v%%=*}; binary=${v#*=}
    exp_addr=127.0.0.1:$port; port=$((port + 1))
    # $binary is split into words: a build may carry flags or an env prefix.
    # shellcheck disable=SC2086
    GOMEMLIMIT="$GOMEMLIMIT" $binary --web.listen-address="$exp_addr" --vllm.url="http://$sim_addr" ${EXPORTER_ARGS:-} \
      >"$work/exporter-$size-$name.log" 2>&1 &
    pids+=($!)
    vnames+=("$name"); vpids+=($!); vaddrs+=("$exp_addr")
    : >"$work/samples-$size-$name.txt"
    : >"$work/trend-$size-$name.txt"
  done
  for k in "${!vnames[@]}"; do
    wait_up "http://${vaddrs[$k]}/metrics"
    cpu0[k]=$(cpu_ticks "${vpids[$k]}")
  done
  t0=$(now)
  samples=$((DURATION / SAMPLE))
  for ((s = 1; s <= samples; s++)); do
    sleep "$SAMPLE"
    for k in "${!vnames[@]}"; do
      name=${vnames[$k]}
      a=$(rss_anon_kib "${vpids[$k]}")
      curl -fsS -o "$work/scrape.txt" "http://${vaddrs[$k]}/metrics" || continue
      read -r heap dur gr < <(scrape_values "$work/scrape.txt")
      echo "$heap $dur" >>"$work/samples-$size-$name.txt"
      echo "$((s * SAMPLE)) $a $heap" >>"$work/trend-$size-$name.txt"
      [ -z "${g_first[$k]:-}" ] && g_first[k]=$gr
    done
  done
  t1=$(now)
  for k in "${!vnames[@]}"; do
    name=${vnames[$k]}; pid=${vpids[$k]}; exp_addr=${vaddrs[$k]}
    anon_end=$(rss_anon_kib "$pid")
    cpu1=$(cpu_ticks "$pid")
    g_last=$(metric go_goroutines "http://$exp_addr/metrics" || echo 0)
    up=$(metric vllm_up "http://$exp_addr/metrics" || echo 0)
    trend=$work/trend-$size-$name.txt
    # RssAnon at minute 1 and 5: the last sample at or before each.
    anon1=$(awk '$1 <= 60 {a = $2} END {print a + 0}' "$trend")
    anon5=$(awk '$1 <= 300 {a = $2} END {print a + 0}' "$trend")
    # Flat means every sample from minute 5 on, not just the last: the
    # band is the lowest and highest RssAnon sampled after minute 5, as a
    # change from minute 5; then those samples' 5th percentile, median
    # and 95th percentile.
    band=$(awk -v a5="$anon5" -v ae="$anon_end" '$1 > 300 {if (lo == "" || $2 < lo) lo = $2; if ($2 > hi) hi = $2}
      END {if (ae < lo || lo == "") lo = ae; if (ae > hi) hi = ae
        if (a5 > 0) printf "%+.1f/%+.1f%%", 100 * (lo - a5) / a5, 100 * (hi - a5) / a5; else printf "-"}' "$trend")
    spread=$(awk '$1 > 300 {print $2}' "$trend" | percentiles 0.05 0.5 0.95 |
      awk '{printf "%.1f/%.1f/%.1f", $1 / 1024, $2 / 1024, $3 / 1024}')
    spread=${spread:--}
    # When the level was reached: the first sample from which every later
    # one lies within 5 % of the level (the median of the last third of the
    # run), in minutes. The runtime's collector reaches its steady cycle
    # some GC cycles after start (docs/hardening.md, "Why RssAnon still
    # climbs after minute 5"): this says when, where minute 5 alone does not.
    n=$(wc -l <"$trend")
    level=$(tail -n "$(((n + 2) / 3))" "$trend" | awk '{print $2}' | percentiles 0.5)
    level=${level:-0}
    level_at=$(awk -v L="$level" '{t[NR] = $1; a[NR] = $2} END {
        if (NR == 0 || L == 0) {printf "-"; exit}
        s = NR; while (s > 1 && a[s - 1] >= 0.95 * L && a[s - 1] <= 1.05 * L) s--
        printf "%.1f", t[s] / 60 }' "$trend")
    rows+=("$(sort -k2 -g "$work/samples-$size-$name.txt" | awk -v s="$size" -v n="$name" -v b="$body" -v a1="$anon1" -v a5="$anon5" -v ae="$anon_end" -v band="$band" -v spread="$spread" -v level_at="$level_at" \
      -v lim="$limit_bytes" -v c0="${cpu0[$k]}" -v c1="$cpu1" -v t0="$t0" -v t1="$t1" -v clk="$clk" -v g0="${g_first[$k]:-0}" -v g1="$g_last" -v up="$up" '
      {h[NR] = $1; d[NR] = $2; hs += $1; if ($1 > hm) hm = $1}
      END {
        med = (NR % 2) ? d[(NR + 1) / 2] : (d[NR / 2] + d[NR / 2 + 1]) / 2
        printf "%-6s %-10s %9.0f %8.1f %8.1f %8.1f %+7.1f%% %13s %15s %7s %9.1f %9.1f %7.0f%% %9.0f %9.0f %9.4f %4s-%-4s %3d",
          s, n, b / 1024, a1 / 1024, a5 / 1024, ae / 1024, (a5 > 0 ? 100 * (ae - a5) / a5 : 0), band, spread, level_at,
          hs / NR / 1048576, hm / 1048576, (lim > 0 ? 100 * hm / lim : 0), med * 1000, d[NR] * 1000,
          (c1 - c0) / clk / (t1 - t0), g0, g1, up }')")
    # The trend: RssAnon at the end of each 5 minutes, and the largest heap
    # in use within them (is the level reached, or still climbing?).
    trends+=("$(awk -v s="$size" -v n="$name" '
      {w = int(($1 - 1) / 300); a[w] = $2; if ($3 > h[w]) h[w] = $3; if (w > m) m = w}
      END {printf "%-6s %-10s", s, n; for (i = 0; i <= m; i++) printf " %5.1f/%-5.1f", a[i] / 1024, h[i] / 1048576}' "$trend")")
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  kill "$sim_pid" 2>/dev/null || true
  wait "$sim_pid" 2>/dev/null || true
  if [ "$SKIP_BENCH" != 1 ]; then
    echo "growth: BenchmarkScrape on the ${size} body" >&2
    out=$(SCRAPE_BODY="$work/body-$size.txt" go test -count=1 -run '^$' -bench '^BenchmarkScrape$/^file/scrape$' -benchtime 20x -benchmem ./collector/vllm/ 2>&1 | awk '/^BenchmarkScrape\/file/')
    bench_rows+=("$(echo "$out" | awk -v s="$size" -v b="$body" '{
      for (i = 1; i < NF; i++) { if ($(i + 1) == "B/op") a = $i; if ($(i + 1) == "ns/op") ns = $i }
      printf "%-6s %9.0f %12.0f %8.2fx %10.1f", s, b / 1024, a / 1024, a / b, ns / 1e6 }')")
  fi
done

printf "\nvllm_exporter at defaults against vllm-sim, %s min per size, GOMEMLIMIT=%s\n\n" "$MINUTES" "${GOMEMLIMIT:-unset}"
printf "%-6s %-10s %9s %8s %8s %8s %8s %13s %15s %7s %9s %9s %8s %9s %9s %9s %9s %3s\n" \
  "size" "build" "body KiB" "anon m1" "anon m5" "anon end" "m5->end" "m5 band" "after m5 p5/md/p95" "level@" "heap avg" "heap max" "of limit" "scrape md" "scrape mx" "CPU s/s" "gorout" "up"
for r in "${rows[@]}"; do echo "$r"; done
echo
echo "anon: RssAnon in MiB at minute 1, minute 5 and the end; m5 band: the lowest and highest RssAnon sampled"
echo "after minute 5, as a change from minute 5 (flat: both within 10 %); after m5: those samples' 5th percentile, median"
echo "and 95th percentile (MiB); level@: the minute from which every sample lies within 5 % of the level (the median"
echo "of the last third of the run); heap: Go heap in use (MiB), its peak as a share of GOMEMLIMIT; scrape:"
echo "vllm_exporter_scrape_duration_seconds in ms (median, longest) over samples every ${SAMPLE}s; gorout: go_goroutines"
echo "at the first sample and the end. Builds named on the command line ran side by side against one simulator per size."
printf "\ntrend: RssAnon at the end of each 5 minutes / the largest Go heap in use within them (MiB)\n\n"
for r in "${trends[@]}"; do echo "$r"; done
if [ "${#bench_rows[@]}" -gt 0 ]; then
  printf "\nallocations per scrape (collector/vllm BenchmarkScrape on the same body):\n\n"
  printf "%-6s %9s %12s %9s %10s\n" "size" "body KiB" "alloc KiB" "of body" "ms/scrape"
  for r in "${bench_rows[@]}"; do echo "$r"; done
fi
