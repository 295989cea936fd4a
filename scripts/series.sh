#!/usr/bin/env bash
# Series budget: samples on vllm_exporter's /metrics at defaults against
# the simulated vLLM speaking today's layout (--metrics-version v1-0.33, one
# model, load generator on, probes at their default rate), side by side with
# vLLM's own /metrics body from the same run.
#
#   scripts/series.sh [SETTLE_SECONDS]        (default 330)
#
# It waits SETTLE_SECONDS (at least until a probe has been recorded and the
# SLO watchdog has evaluated; the default lets the 5m window fill, as a
# long-running exporter's have), then counts the samples (non-comment
# lines) of both bodies and prints them by family group and the ratio, then
# every exporter family with its sample count (FAMILIES=0 skips that list).
# The design's budget: the exporter exports no more samples than vLLM does
# (docs/cost.md).
#
# Environment: BUILD (1: run `make build` first; 0: use bin/ as is),
# SIM_ARGS (extra vllm-sim flags), EXPORTER_ARGS (extra vllm_exporter
# flags), FAMILIES (1: list the families by samples; md: also print
# docs/cost.md's family table with the shipped files that read each).
set -euo pipefail
cd "$(dirname "$0")/.."

SETTLE=${1:-330}
BUILD=${BUILD:-1}
FAMILIES=${FAMILIES:-1}
command -v curl >/dev/null || { echo "series: curl not found" >&2; exit 1; }
if [ "$BUILD" = 1 ]; then
  make build >/dev/null
fi

base=$((20000 + RANDOM % 20000))
SIM_ADDR=127.0.0.1:$base
EXP_ADDR=127.0.0.1:$((base + 1))
SCRIPT=series
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

# shellcheck disable=SC2086
bin/vllm-sim --web.listen-address="$SIM_ADDR" --metrics-version=v1-0.33 --log.level=warn ${SIM_ARGS:-} >"$work/sim.log" 2>&1 &
pids+=($!)
# shellcheck disable=SC2086
bin/vllm_exporter --web.listen-address="$EXP_ADDR" --vllm.url="http://$SIM_ADDR" ${EXPORTER_ARGS:-} >"$work/exporter.log" 2>&1 &
pids+=($!)
wait_up "http://$SIM_ADDR/metrics"
wait_up "http://$EXP_ADDR/metrics"

for ((s = 0; s < SETTLE + 60; s++)); do
  probes=$(metric 'vllm_probe_requests_total{profile="short-chat"}' "http://$EXP_ADDR/metrics")
  evals=$(curl -fsS "http://$EXP_ADDR/metrics" | grep -c '^vllm_slo_last_evaluation_timestamp_seconds' || true)
  if [ "${probes:-0}" != 0 ] && [ "$evals" -gt 0 ] && [ "$s" -ge "$SETTLE" ]; then break; fi
  sleep 1
done
curl -fsS "http://$SIM_ADDR/metrics" >"$work/vllm.txt"
curl -fsS "http://$EXP_ADDR/metrics" >"$work/exporter.txt"

# family NAME-WITH-SUFFIX: the family a sample belongs to.
families() {
  grep -v '^#' "$1" | sed -E 's/[{ ].*//; s/_(bucket|sum|count)$//'
}
group() {
  awk '{
    g = "vLLM-derived (vllm_*)"
    if ($1 ~ /^vllm_probe_.*_seconds$/ && $1 !~ /_last_|_gap_/) g = "probe histograms and window quantiles"
    else if ($1 ~ /^vllm_probe_/ || $1 == "vllm_engine_stalled") g = "probe counters and gauges"
    else if ($1 ~ /^vllm_slo_/) g = "SLO watchdog (vllm_slo_*)"
    else if ($1 ~ /^vllm_(bottleneck|health_verdict|capacity_)/) g = "verdicts (bottleneck, health, capacity)"
    else if ($1 ~ /^vllm_exporter_/) g = "exporter self-metrics (vllm_exporter_*)"
    else if ($1 ~ /^vllm_gpu_/) g = "GPU (vllm_gpu_*)"
    else if ($1 ~ /^(go|process|promhttp)_/) g = "Go runtime and process"
    n[g]++
  } END { for (g in n) printf "%-44s %6d\n", g, n[g] }' | sort -k1,1
}
v=$(grep -vc '^#' "$work/vllm.txt")
e=$(grep -vc '^#' "$work/exporter.txt")
echo "series budget: vllm-sim --metrics-version=v1-0.33 (1 model), vllm_exporter ${EXPORTER_ARGS:-at defaults}"
echo
families "$work/exporter.txt" | group
echo
printf "%-44s %6s %6s %6s\n" "" "vLLM" "exp." "ratio"
awk -v v="$v" -v e="$e" 'BEGIN { printf "%-44s %6d %6d %6.2f\n", "samples on /metrics, one pod, one model", v, e, e / v }'
if [ "$FAMILIES" = 1 ]; then
  echo
  echo "exporter families by samples:"
  families "$work/exporter.txt" | sort | uniq -c | sort -rn | awk '{printf "%6d %s\n", $1, $2}'
fi
if [ "$FAMILIES" = md ]; then
  # docs/cost.md's family table: type, samples per pod, those with a
  # non-empty model label, and the shipped files whose expressions read
  # the family (its name, or a histogram's _bucket/_sum/_count, as a whole
  # metric name).
  echo
  echo "| family | type | samples per pod | of which per model | read by |"
  echo "|---|---|---:|---:|---|"
  grep '^# TYPE ' "$work/exporter.txt" | while read -r _ _ fam typ; do
    n=$(grep -cE "^${fam}(_bucket|_sum|_count)?[{ ]" "$work/exporter.txt" || true)
    pm=$(grep -E "^${fam}(_bucket|_sum|_count)?[{ ]" "$work/exporter.txt" | grep -cE 'model="[^"]' || true)
    readers=$(grep -lE "(^|[^a-zA-Z0-9_:])${fam}(_bucket|_sum|_count)?(\$|[^a-zA-Z0-9_:])" alerts/*.yml dashboards/*.json |
      xargs -r -n1 basename | sed 's/\..*//' | sort | tr '\n' ' ' | sed 's/ $//')
    echo "| \`$fam\` | $typ | $n | $pm | ${readers:-—} |"
  done
fi
