#!/usr/bin/env bash
# unfused-rope.patch's measurements in one call on the GPU machine (docs/CUDA_NOTES.md "Session 17", "A lead for
# B=64"). Usage: tools/experiments/unfused-rope.sh MAIN_QINFER EXPERIMENT_QINFER EXPERIMENT_KERNEL_BENCH
# (set LD_LIBRARY_PATH to the folder with the Debian libraries qinfer links, as for tools/gpu-run.sh).
# Prints the decode_step layer both ways, then one line per run: round, shape, binary and switch, median ms per
# decode step and tok/s.
set -uo pipefail
main_bin=${1:?usage: unfused-rope.sh MAIN_QINFER EXPERIMENT_QINFER EXPERIMENT_KERNEL_BENCH}
exp_bin=${2:?usage: unfused-rope.sh MAIN_QINFER EXPERIMENT_QINFER EXPERIMENT_KERNEL_BENCH}
exp_bench=${3:?usage: unfused-rope.sh MAIN_QINFER EXPERIMENT_QINFER EXPERIMENT_KERNEL_BENCH}
config=$(cd "$(dirname "$0")/../.." && pwd)/configs/Qwen3-4B-Instruct-2507/config.json

"$exp_bench" decode_step 64 576 2>&1 | grep -E 'step|unfused'

step() {  # step BATCH CONTEXT BINARY [VAR=VALUE]
  env "${@:4}" "$3" bench latency --load-format dummy --config "$config" --device cuda --batch "$1" --input-len "$2" \
    --output-len 128 --max-model-len 16384 --json 2>/dev/null |
    python3 -c 'import json, sys; j = json.load(sys.stdin); print("%.4f ms %.0f tok/s" % (j["decode_step_seconds_median"] * 1e3, j["decode_tokens_per_second"]))'
}

for round in 1 2; do
  for shape in 64:512 32:1024 16:1024; do
    batch=${shape%%:*} context=${shape##*:}
    echo "round $round B=$batch L=$context main: $(step "$batch" "$context" "$main_bin")"
    echo "round $round B=$batch L=$context exp fused: $(step "$batch" "$context" "$exp_bin")"
    echo "round $round B=$batch L=$context exp unfused: $(step "$batch" "$context" "$exp_bin" QINFER_EXP_UNFUSED_FROM=5)"
  done
done
