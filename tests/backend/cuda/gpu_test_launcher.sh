#!/usr/bin/env bash
# CTest's launcher for the GPU tests: gpu_test_launcher.sh GPU_PROBE TEST_BINARY ARGS... runs the test unless
# GPU_PROBE finds no device, in which case the test is reported as skipped (exit 77) without loading its binary.
# Listing the tests (--gtest_list_tests, at build time) always runs the binary.
set -euo pipefail
probe="$1"
shift
if [[ " $* " != *" --gtest_list_tests "* ]]; then
  status=0
  reason="$("$probe")" || status=$?
  if ((status == 77)); then
    echo "[  SKIPPED ] ${reason}"
    exit 77
  fi
fi
exec "$@"
