#!/usr/bin/env bash
# The vLLM scrape path's cost side by side in one run (collector/vllm's
# BenchmarkScrape and BenchmarkRender): for each body (the V1 fixture of one
# model, the simulator's 16 models x 8 engines), one whole scrape (loopback
# GET, scan, normalize, history and windows) against prometheus/common's
# text parser parsing the same body alone, in time and bytes allocated, and
# one /metrics render of the scraper's state (a registry gathering its const
# metrics). Medians of COUNT runs of each benchmark.
#
#   scripts/bench-scrape.sh [COUNT]        (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
go test -count="$count" -run '^$' -bench '^Benchmark(Scrape|Render)$' -benchmem ./collector/vllm/ | awk '
  function median(key,   n, i, j, t, v) {
    n = cnt[key]
    for (i = 1; i <= n; i++) v[i] = vals[key, i]
    for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j] < v[j-1]; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  /^Benchmark(Scrape|Render)\// {
    name = $1; sub(/-[0-9]+$/, "", name)
    for (i = 2; i < NF; i++) {
      if ($(i + 1) == "ns/op") { k = name " ns"; vals[k, ++cnt[k]] = $i }
      if ($(i + 1) == "B/op") { k = name " B"; vals[k, ++cnt[k]] = $i }
    }
  }
  END {
    printf "| body | expfmt parse | whole scrape | time ratio | expfmt allocates | scrape allocates | alloc ratio | /metrics render |\n"
    printf "|---|---|---|---|---|---|---|---|\n"
    split("one-model 16x8", bodies, " ")
    for (b = 1; b <= 2; b++) {
      body = bodies[b]; e = "BenchmarkScrape/" body "/expfmt"; s = "BenchmarkScrape/" body "/scrape"; r = "BenchmarkRender/" body
      if (!cnt[e " ns"] || !cnt[s " ns"]) continue
      printf "| %s | %.2f ms | %.2f ms | %.2fx | %.0f KB | %.0f KB | %.3fx | %.2f ms, %.0f KB |\n", body,
        median(e " ns") / 1e6, median(s " ns") / 1e6, median(s " ns") / median(e " ns"),
        median(e " B") / 1e3, median(s " B") / 1e3, median(s " B") / median(e " B"),
        median(r " ns") / 1e6, median(r " B") / 1e3
    }
    printf "\nmedians of %d runs each; ratios are the scrape over expfmt measured in the same run\n", cnt[e " ns"]
  }'
