#!/usr/bin/env bash
# One-call GPU verification of the direct fp8 decode attention kernel (decode_attention_fp8_direct.cu, not yet run on
# a GPU when written; docs/CUDA_NOTES.md "fp8 decode attention, direct fragments"). Every command runs under a timeout;
# the timeouts add up to 90 s.
# Usage: tools/verify-fp8-decode.sh BIN_DIR [LOG_DIR]
#   BIN_DIR holds prebuilt sm_90a binaries, looked up by name:
#     cuda_backend_tests, cuda_kernel_bench   this branch as committed (the backend still dispatches the staging kernel)
#     cuda_backend_tests_direct (optional)    the same tests built with kFp8DecodeAttentionKernel set to kFp8Direct in
#                                             src/backend/cuda/kernels/decode_attention.h, so the backend parity tests
#                                             run the direct kernel end to end
#   Build them on the development machine (CUDA_ARCHITECTURES=90a), strip them and carry BIN_DIR; the direct build from
#   an exported copy of the tree, e.g.
#     git archive HEAD | tar -x -C /tmp/direct && ln -s "$PWD/web/node_modules" /tmp/direct/web/node_modules &&
#     sed -i 's/kFp8DecodeAttentionKernel = DecodeAttentionKernel::kCpAsync/kFp8DecodeAttentionKernel = \
#       DecodeAttentionKernel::kFp8Direct/' /tmp/direct/src/backend/cuda/kernels/decode_attention.h
#   then configure /tmp/direct as usual and build cuda_backend_tests there.
# Steps: (1) SASS instruction counts of both fp8 kernels' head_dim 128 instantiations, when cuobjdump is installed;
# (2) the fp8 decode attention tests of both kernels and the split planner (45 s: a hang means a barrier bug);
# (3) cuda_kernel_bench decode_attention at 64 x 8192, 256 x 1536, 64 x 640, 16 x 32768 (bf16, fp8 staging and fp8
# direct rows from the same binary and run); (4) the backend parity tests (bf16 and fp8 presets). The summary is last.
set -uo pipefail
bin_dir=${1:?usage: tools/verify-fp8-decode.sh BIN_DIR [LOG_DIR]}
log_dir=${2:-$(mktemp -d /tmp/verify-fp8-decode.XXXXXX)}
mkdir -p "$log_dir"
tests="$bin_dir/cuda_backend_tests"
bench="$bin_dir/cuda_kernel_bench"
tests_direct="$bin_dir/cuda_backend_tests_direct"
summary=()

# "N passed, N failed, N skipped" of a gtest log (the lines printed as each test ends, not the summary's repeats).
counts() {
  local ended=' \([0-9]+ ms\)$'
  echo "$(grep -cE "^\[       OK \] .*$ended" "$1") passed, $(grep -cE "^\[  FAILED  \] .*$ended" "$1") failed," \
    "$(grep -cE "^\[  SKIPPED \] .*$ended" "$1") skipped"
}

# (1) Per-opcode counts of each fp8 kernel (whole kernel: the unrolled tile loop dominates).
cuobjdump=$(command -v cuobjdump || echo "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump")
if [[ -x $cuobjdump ]]; then
  timeout 5 "$cuobjdump" -sass "$tests" >"$log_dir/sass.txt" 2>&1
  for kernel in decode_attention_fp8_kernelILi128E decode_attention_fp8_direct_kernelILi128E; do
    awk -v k="$kernel" '/Function :/ { inside = index($0, k) > 0 } inside && /^ +\/\*[0-9a-f]+\*\// {
        op = $2; if (op ~ /^@/) op = $3; sub(/\..*/, "", op); n[op]++; total++ }
      END { printf "%s: %d instructions;", k, total; for (o in n) if (n[o] >= 8) printf " %s %d", o, n[o]; print "" }' \
      "$log_dir/sass.txt"
  done | tee "$log_dir/sass_counts.txt"
fi

# (2) Both fp8 kernels against the float64 reference (head_dim 64/128, odd lengths, planned and forced splits,
# poisoned outputs, NaN bytes and scales past each context) and the planner.
timeout 45 "$tests" --gtest_filter='Fp8/DecodeAttentionTest.*:DecodeAttentionPlan.*' >"$log_dir/fp8_tests.log" 2>&1
status=$?
summary+=("| fp8 decode tests | exit $status: $(counts "$log_dir/fp8_tests.log") |")
grep -E '^\[  FAILED  \] [A-Za-z]|Failure' "$log_dir/fp8_tests.log" | head -10

# (3) Same-run timings: bf16 cp.async / bulk copy, fp8 staging (cp.async) and fp8 direct.
: >"$log_dir/bench_rows.txt"
for shape in "64 8192" "256 1536" "64 640" "16 32768"; do
  log="$log_dir/bench_${shape// /x}.log"
  # shellcheck disable=SC2086  # two arguments
  timeout 8 "$bench" decode_attention $shape >"$log" 2>&1
  status=$?
  grep -E '^\| decode attention' "$log" | awk '!seen[$0]++' >>"$log_dir/bench_rows.txt"
  [[ $status -ne 0 ]] && summary+=("| bench $shape | exit $status (log: $log) |")
done
cat "$log_dir/bench_rows.txt"

# (4) The whole model against the CPU backend; with the direct build, its fp8 presets run the direct kernel.
parity_bin=$tests
[[ -x $tests_direct ]] && parity_bin=$tests_direct
timeout 12 "$parity_bin" --gtest_filter='*CudaBackendParityTest*' >"$log_dir/parity.log" 2>&1
status=$?
summary+=("| parity ($(basename "$parity_bin")) | exit $status: $(counts "$log_dir/parity.log") |")

echo "logs: $log_dir"
printf '%s\n' "| step | result |" "|---|---|" "${summary[@]}"
