#!/usr/bin/env bash
# Configures and builds qinfer into build/ (CUDA backend included when nvcc is found). Extra args go to cmake.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cmake -S "${repo_root}" -B "${repo_root}/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "${repo_root}/build" -j "$(nproc)"
