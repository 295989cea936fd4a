#!/usr/bin/env bash
# Growth benchmark: vllm_exporter at default flags against the simulated
# vLLM at several deployment sizes (models x data-parallel engines), one
# after the other, printing RSS over time, scrape-cycle time and CPU, so
# that "memory levels off and grows sub-linearly with models x engines" is
# a figure, not a hope.
#
#   scripts/growth.sh [DURATION_SECONDS]        (default 300; the issue's run is 1200)
#
# For each size in SIZES (default "1x1 8x8 16x8"): start vllm-sim with that
# many models (--served-model-name) and engines (--data-parallel-size), its
# load generator on, and vllm_exporter at defaults against it with the
# image's GOMEMLIMIT; sample RSS (/proc/PID/status) every SAMPLE seconds and
# the exporter's own vllm_exporter_scrape_duration_seconds; at the end print
# one row per size: body size, RSS at each quarter of the run and at the end,
# the peak (VmHWM), the growth over the second half, the longest scrape
# cycle seen and CPU seconds per second.
#
# Environment: SIZES, SAMPLE (10), GOMEMLIMIT (the Dockerfile's), BUILD (1:
# `make build` first; 0: use bin/ as is), EXPORTER_ARGS.
# Needs: Linux /proc, curl, a free loopback port range (picked at random).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-300}
SIZES=${SIZES:-"1x1 8x8 16x8"}
SAMPLE=${SAMPLE:-10}
BUILD=${BUILD:-1}
SCRIPT=growth
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
GOMEMLIMIT=${GOMEMLIMIT:-$(image_gomemlimit)}

command -v curl >/dev/null || { echo "growth: curl not found" >&2; exit 1; }
if [ "$BUILD" = 1 ]; then
  make build >/dev/null
fi

echo "growth: ${DURATION}s per size, sizes: $SIZES, GOMEMLIMIT=${GOMEMLIMIT:-unset}" >&2
rows=()
for size in $SIZES; do
  models=${size%x*}
  engines=${size#*x}
  base=$((20000 + RANDOM % 20000))
  sim_addr=127.0.0.1:$base
  exp_addr=127.0.0.1:$((base + 1))
  names=()
  for ((m = 0; m < models; m++)); do names+=("--served-model-name=model-$m"); done
  bin/vllm-sim --web.listen-address="$sim_addr" --log.level=warn "${names[@]}" \
    --data-parallel-size="$engines" >"$work/sim-$size.log" 2>&1 &
  sim_pid=$!
  pids+=("$sim_pid")
  wait_up "http://$sim_addr/metrics"
  body=$(curl -fsS "http://$sim_addr/metrics" | wc -c)
  # shellcheck disable=SC2086
  GOMEMLIMIT="$GOMEMLIMIT" bin/vllm_exporter --web.listen-address="$exp_addr" --vllm.url="http://$sim_addr" ${EXPORTER_ARGS:-} \
    >"$work/exporter-$size.log" 2>&1 &
  exp_pid=$!
  pids+=("$exp_pid")
  wait_up "http://$exp_addr/metrics"

  cpu0=$(cpu_ticks "$exp_pid"); t0=$(now)
  q=()
  worst=0
  samples=$((DURATION / SAMPLE))
  for ((s = 1; s <= samples; s++)); do
    sleep "$SAMPLE"
    r=$(rss_kib "$exp_pid")
    d=$(metric vllm_exporter_scrape_duration_seconds "http://$exp_addr/metrics" || echo 0)
    worst=$(awk -v a="$worst" -v b="${d:-0}" 'BEGIN {print (b > a) ? b : a}')
    for k in 1 2 3; do
      [ "$s" -eq $((samples * k / 4)) ] && q[k]=$r
    done
    [ "$s" -eq $((samples / 2)) ] && half=$r
  done
  end=$(rss_kib "$exp_pid"); hwm=$(hwm_kib "$exp_pid")
  cpu1=$(cpu_ticks "$exp_pid"); t1=$(now)
  goroutines=$(metric go_goroutines "http://$exp_addr/metrics" || echo 0)
  up=$(metric vllm_up "http://$exp_addr/metrics" || echo 0)
  rows+=("$(awk -v s="$size" -v b="$body" -v q1="${q[1]:-0}" -v q2="${q[2]:-0}" -v q3="${q[3]:-0}" -v e="$end" \
    -v h="$hwm" -v half="${half:-0}" -v w="$worst" -v c0="$cpu0" -v c1="$cpu1" -v t0="$t0" -v t1="$t1" -v clk="$clk" \
    -v g="$goroutines" -v up="$up" 'BEGIN {
      printf "%-6s %10.0f %8.1f %8.1f %8.1f %8.1f %8.1f %+9.1f %10.0f %9.4f %6d %4d",
        s, b / 1024, q1 / 1024, q2 / 1024, q3 / 1024, e / 1024, h / 1024, (e - half) / 1024, w * 1000,
        (c1 - c0) / clk / (t1 - t0), g, up }')")
  kill "$exp_pid" "$sim_pid" 2>/dev/null || true
  wait "$exp_pid" "$sim_pid" 2>/dev/null || true
done

printf "\nvllm_exporter at defaults against vllm-sim, %ss per size, GOMEMLIMIT=%s\n\n" "$DURATION" "${GOMEMLIMIT:-unset}"
printf "%-6s %10s %8s %8s %8s %8s %8s %9s %10s %9s %6s %4s\n" \
  "size" "body KiB" "RSS 1/4" "RSS 1/2" "RSS 3/4" "RSS end" "peak" "2nd half" "scrape ms" "CPU s/s" "gorout" "up"
for r in "${rows[@]}"; do echo "$r"; done
echo
echo "RSS in MiB; '2nd half' is RSS end minus RSS at half time (flat = levelled off); 'scrape ms' the longest"
echo "vllm_exporter_scrape_duration_seconds seen (default --vllm.timeout is 4000 ms)."
