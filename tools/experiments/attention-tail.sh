#!/usr/bin/env bash
# The variants of attention-tail.patch against main, two rounds in one call on the GPU machine (docs/CUDA_NOTES.md
# "Session 16"). Usage: tools/experiments/attention-tail.sh MAIN_QINFER EXPERIMENT_QINFER
# (set LD_LIBRARY_PATH to the folder with the Debian libraries qinfer links, as for tools/gpu-run.sh).
# Prints one line per run: round, shape, binary and switches, median ms per decode step and tok/s.
set -uo pipefail
main_bin=${1:?usage: attention-tail.sh MAIN_QINFER EXPERIMENT_QINFER}
exp_bin=${2:?usage: attention-tail.sh MAIN_QINFER EXPERIMENT_QINFER}
config=$(cd "$(dirname "$0")/../.." && pwd)/configs/Qwen3-4B-Instruct-2507/config.json

step() {  # step BATCH CONTEXT BINARY [VAR=VALUE ...]
  local batch=$1 context=$2 bin=$3
  shift 3
  env "$@" "$bin" bench latency --load-format dummy --config "$config" --device cuda --batch "$batch" \
    --input-len "$context" --output-len 128 --max-model-len 16384 --json 2>/dev/null |
    python3 -c 'import json, sys; j = json.load(sys.stdin); print("%.4f ms %.0f tok/s" % (j["decode_step_seconds_median"] * 1e3, j["decode_tokens_per_second"]))'
}

variants=("QINFER_EXP_MERGE_BATCH=8" "QINFER_EXP_MERGE_BATCH=16" "QINFER_EXP_MERGE_BATCH=24"
  "QINFER_EXP_PREFETCH_UNITS=2" "QINFER_EXP_PREFETCH_UNITS=1" "QINFER_EXP_PREFETCH_UNITS=0"
  "QINFER_EXP_MERGE_BATCH=24 QINFER_EXP_PREFETCH_UNITS=2")
for round in 1 2; do
  for shape in 1:1024 2:1024 1:4096; do
    batch=${shape%%:*} context=${shape##*:}
    echo "round $round B=$batch L=$context main: $(step "$batch" "$context" "$main_bin")"
    for variant in "${variants[@]}"; do
      read -r -a switches <<<"$variant"
      echo "round $round B=$batch L=$context $variant: $(step "$batch" "$context" "$exp_bin" "${switches[@]}")"
    done
  done
done
