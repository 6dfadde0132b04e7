#!/usr/bin/env bash
# release-edges.patch's measurements in one call on the GPU machine (docs/CUDA_NOTES.md "Session 18", "Where B=64
# stands, as a bound"). Usage: tools/experiments/release-edges.sh MAIN_QINFER EXP_QINFER EXP_TESTS EXP_PROBE
# (LD_LIBRARY_PATH set as for tools/gpu-run.sh). First the soundness checks, then the speed: the poisoned-input probe
# (exit 0 only if every GEMM launched on a released edge reads its producer's complete output in all graphs), the GPU
# tests with the switch on, then ms per decode step of main and of the experiment binary with the switch off and on.
set -uo pipefail
main_bin=${1:?usage: release-edges.sh MAIN_QINFER EXP_QINFER EXP_TESTS EXP_PROBE}
exp_bin=${2:?usage: release-edges.sh MAIN_QINFER EXP_QINFER EXP_TESTS EXP_PROBE}
exp_tests=${3:?usage: release-edges.sh MAIN_QINFER EXP_QINFER EXP_TESTS EXP_PROBE}
exp_probe=${4:?usage: release-edges.sh MAIN_QINFER EXP_QINFER EXP_TESTS EXP_PROBE}
config=$(cd "$(dirname "$0")/../.." && pwd)/configs/Qwen3-4B-Instruct-2507/config.json

"$exp_probe"
echo "probe exit $?"
QINFER_EXP_RELEASE_EDGES=1 "$exp_tests" >/tmp/release-tests.log 2>&1
echo "GPU tests with the switch: exit $?, $(grep -c '^\[       OK \]' /tmp/release-tests.log) passed"
grep -E '^\[  FAILED  \] [A-Za-z]' /tmp/release-tests.log | head

step() {  # step BATCH CONTEXT BINARY [VAR=VALUE]
  env "${@:4}" "$3" bench latency --load-format dummy --config "$config" --device cuda --batch "$1" --input-len "$2" \
    --output-len 128 --max-model-len 16384 --json 2>/dev/null |
    python3 -c 'import json, sys; j = json.load(sys.stdin); print("%.4f ms %.0f tok/s" % (j["decode_step_seconds_median"] * 1e3, j["decode_tokens_per_second"]))'
}
for round in 1 2; do
  for shape in 64:512 32:1024 16:1024 8:1024; do
    batch=${shape%%:*} context=${shape##*:}
    echo "round $round B=$batch L=$context main: $(step "$batch" "$context" "$main_bin")"
    echo "round $round B=$batch L=$context exp off: $(step "$batch" "$context" "$exp_bin")"
    echo "round $round B=$batch L=$context exp released: $(step "$batch" "$context" "$exp_bin" QINFER_EXP_RELEASE_EDGES=1)"
  done
done
