#!/usr/bin/env bash
# The libFuzzer targets (the HTTP request reader, the safetensors header parser) built with clang and
# -fsanitize=fuzzer,address,undefined in build-fuzz/, each run for a bounded time from its corpus in tests/data/fuzz.
# CTest runs this as `fuzz_sanitized` (label fuzz). QINFER_FUZZ_SECONDS sets the time per target (default 20).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${QINFER_FUZZ_BUILD_DIR:-${repo_root}/build-fuzz}"
seconds="${QINFER_FUZZ_SECONDS:-20}"
cmake -S "${repo_root}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQINFER_CUDA=OFF -DQINFER_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "${build}" -j "${QINFER_FUZZ_JOBS:-2}" --target fuzz_http_request fuzz_safetensors
run() {
  local target="$1" corpus="$2" work
  work="$(mktemp -d)"
  cp -r "${corpus}/." "${work}/"  # new inputs go to a scratch copy, not into the repository
  (cd "${work}" && "${build}/$(dirname "$3")/${target}" -max_total_time="${seconds}" -max_len=4096 -timeout=10 \
    -print_final_stats=1 "${work}")
  rm -rf "${work}"
}
run fuzz_http_request "${repo_root}/tests/data/fuzz/http_request" tests/server/x
run fuzz_safetensors "${repo_root}/tests/data/fuzz/safetensors" tests/model/x
echo "fuzz: every target ran ${seconds} s without a finding"
