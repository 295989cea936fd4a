#!/usr/bin/env bash
# Status page screenshot: starts the demo exporter (a simulated vLLM
# in-process, with traffic), lets it run until probes, scrapes and the SLO
# watchdog have something to show, and takes a headless-Chromium screenshot
# of its status page at / into docs/images/status-page.png.
#
#   scripts/screenshot-status.sh [SETTLE_SECONDS]     (default 75)
#
# The demo's probe profile runs every 15 s, so the default settle time
# shows a handful of probes and a minute of scrapes. A few probes are cut
# mid-stream (the simulator's stream_cut fault, 20 s of it), so failed
# probes and their reasons show beside the successful ones.
#
# Environment: BUILD (1: run `make build` first; 0: use bin/ as is), OUT
# (the PNG; default docs/images/status-page.png), WIDTH and HEIGHT (the
# window, default 1400x2000), CHROMIUM (default: chromium, Debian's
# package; `apt-get install -y chromium` if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

SETTLE=${1:-75}
BUILD=${BUILD:-1}
OUT=${OUT:-docs/images/status-page.png}
CHROMIUM=${CHROMIUM:-chromium}
command -v curl >/dev/null || { echo "screenshot-status: curl not found" >&2; exit 1; }
command -v "$CHROMIUM" >/dev/null || { echo "screenshot-status: $CHROMIUM not found (Debian: apt-get install -y chromium)" >&2; exit 1; }
if [ "$BUILD" = 1 ]; then
  make build >/dev/null
fi

EXP_ADDR=127.0.0.1:$((20000 + RANDOM % 20000))
SCRIPT=screenshot-status
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

bin/vllm_exporter --demo --web.listen-address="$EXP_ADDR" --log.level=info >"$work/exporter.log" 2>&1 &
pids+=($!)
wait_up "http://$EXP_ADDR/-/ready"
# The demo's simulator: its URL is in the exporter's log.
sim=$(sed -n 's/.*msg="demo mode: scraping the simulated vLLM" url=\([^ ]*\).*/\1/p' "$work/exporter.log" | head -1)
[ -n "$sim" ] || { echo "screenshot-status: no simulator URL in the exporter's log" >&2; exit 1; }
sleep $((SETTLE / 2))
curl -fsS -o /dev/null -X POST "$sim/admin/fault" -H 'Content-Type: application/json' \
  -d '{"fault":"stream_cut","after_chunks":3,"duration":"20s"}'
sleep $((SETTLE - SETTLE / 2))

mkdir -p "$(dirname "$OUT")"
"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --hide-scrollbars --user-data-dir="$(mktemp -d -p "$work")" \
  --window-size="${WIDTH:-1600},${HEIGHT:-1750}" --screenshot="$PWD/$OUT" "http://$EXP_ADDR/" >"$work/chromium.log" 2>&1 ||
  { tail -20 "$work/chromium.log" >&2; exit 1; }
echo "wrote $OUT"
