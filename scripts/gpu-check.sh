#!/bin/bash
# Validates the NVML collector on a machine with an NVIDIA GPU: samples the
# GPU idle, then under scripts/gpu-load.py (PyTorch: 12 s of bf16 matmuls, 12 s
# of device-to-device copies), beside `nvidia-smi dmon` for comparison, and
# runs the exporter with --collector.gpu against the simulator.
#   OUT=/tmp/gpu-check scripts/gpu-check.sh      # results land in $OUT
set -u
OUT=${OUT:-$(mktemp -d)}; mkdir -p "$OUT"
root=$(cd "$(dirname "$0")/.." && pwd); bin=$(mktemp -d)
cd "$root" && go test -c -o "$bin/gpu.test" ./collector/gpu && go build -o "$bin/" ./cmd/vllm_exporter ./cmd/vllm-sim || exit 1
nvidia-smi -q > "$OUT/nvidia-smi.txt" 2>&1
VLLM_EXPORTER_REAL_GPU=1 VLLM_EXPORTER_REAL_GPU_SAMPLES=3 "$bin/gpu.test" -test.v -test.count=1 -test.run 'TestRealGPU$' > "$OUT/idle.txt" 2>&1
"$bin/vllm-sim" --web.listen-address=127.0.0.1:8000 --metrics-version=v1-0.33 > "$OUT/sim.log" 2>&1 & sim=$!
"$bin/vllm_exporter" --vllm.url=http://127.0.0.1:8000 --collector.gpu --model.parameters=8e9 --model.bytes-per-parameter=2 > "$OUT/exporter.log" 2>&1 & exp=$!
python3 scripts/gpu-load.py > "$OUT/load.txt" 2>&1 & load=$!
sleep 4
nvidia-smi dmon -s pucm -c 22 > "$OUT/dmon.txt" 2>&1 &
VLLM_EXPORTER_REAL_GPU=1 VLLM_EXPORTER_REAL_GPU_SAMPLES=10 VLLM_EXPORTER_REAL_GPU_INTERVAL=2s "$bin/gpu.test" -test.v -test.count=1 -test.run 'TestRealGPU$' > "$OUT/load-samples.txt" 2>&1
curl -s localhost:9470/metrics > "$OUT/metrics-load.txt"
wait $load; kill $sim $exp
grep -E 'util gpu|power|DRAM|clock events' "$OUT/load-samples.txt"; cat "$OUT/load.txt"
echo "results in $OUT"
