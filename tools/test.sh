#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every CTest test. GPU tests report as skipped where no
# GPU exists.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "${repo_root}/tools/setup.sh"
bash "${repo_root}/tools/build.sh"
cd "${repo_root}/build"
ctest --output-on-failure -j "$(nproc)" --timeout 900
