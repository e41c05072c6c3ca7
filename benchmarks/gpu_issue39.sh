#!/usr/bin/env bash
# Issue 39's GPU records, on the device machine, in two calls of the device tool:
#
#   bash benchmarks/gpu_issue39.sh "$OUT" speed    # bench_gpu_engine, the integer ceiling,
#                                                  # the Llama layer (10 configurations)
#   bash benchmarks/gpu_issue39.sh "$OUT" check    # python -m gpu.engine.check (every case)
#   bash benchmarks/gpu_issue39.sh "$OUT" torch    # the Llama layer alone (after a change to it)
#
# Each step writes its record (and its console output) under OUT; a step that runs past its
# timeout leaves what it wrote. The records are committed as they come back (tests/data/ and
# docs/data/), and docs/performance.md is computed from them by benchmarks/performance.py.
set -u
out=${1:?usage: gpu_issue39.sh OUT speed|check|torch}
part=${2:?usage: gpu_issue39.sh OUT speed|check|torch}
case $part in
  speed|check|torch) ;;
  *)
    echo "gpu_issue39.sh: error: the part is speed, check or torch, not $part" >&2
    exit 2
    ;;
esac
export PYTHONPATH=.
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/device.csv"
torch_layer() {
  timeout 250 python3 -m gpu.engine.torch_layer --out "$out/torch" --budget 200 \
    > "$out/torch_layer.txt" 2>&1
}
case $part in
  speed)
    timeout 220 python3 benchmarks/bench_gpu_engine.py --json "$out/bench_gpu_engine.json" \
      > "$out/bench_gpu_engine.txt" 2>&1
    timeout 90 python3 benchmarks/gpu_int_ceiling.py --json "$out/gpu_int_ceiling.json" \
      > "$out/gpu_int_ceiling.txt" 2>&1
    torch_layer
    ;;
  torch)
    torch_layer
    ;;
  check)
    timeout 500 python3 -m gpu.engine.check --out "$out/engine" > "$out/engine_check.txt" 2>&1
    ;;
esac
echo "exit codes written; files:"; find "$out" -type f | sort
