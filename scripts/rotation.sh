#!/usr/bin/env bash
# Model-name rotation drill against the binary (BenchmarkRotationRSS in
# internal/faulttest): vLLM's model names rotate, 84 new ones per scrape
# beside one real model, for SECONDS (default 60; the issue's drill is 600),
# with the image's GOMEMLIMIT and default flags. Prints the peak RSS
# (VmHWM), the most /metrics series seen during the rotation, the baseline
# series and the names rotated. With ROTATION_IDLE_TIMEOUT=2m (say) the
# exporter runs with that --vllm.model-idle-timeout instead of the default
# hour, and the drill also waits it out and prints the series count once the
# rotated names are evicted (back to the baseline).
#
#   scripts/rotation.sh [SECONDS]
#   ROTATION_IDLE_TIMEOUT=2m scripts/rotation.sh 120
set -euo pipefail
cd "$(dirname "$0")/.."
ROTATION_SECONDS=${1:-60} go test -count=1 -run '^$' -bench '^BenchmarkRotationRSS$' -benchtime 1x -timeout 60m -v ./internal/faulttest/ |
  grep -E 'rotation|Benchmark|peak|ok|FAIL'
