#!/usr/bin/env bash
# Starts `qinfer serve` with flags taken from the environment (the container image's entry point; usable anywhere).
# Each variable below, when set and not empty, becomes its flag; arguments given to the script follow them, so
# `docker run IMAGE --max-num-seqs 64` adds flags. QINFER_API_KEY, HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE,
# VLLM_USE_MODELSCOPE, MODELSCOPE_DOMAIN and MODELSCOPE_API_TOKEN are read by qinfer itself.
# QINFER_BIN: the binary (default: qinfer beside this script).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${QINFER_BIN:-${here}/qinfer}"

flags=(
  QINFER_MODEL=--model
  QINFER_REVISION=--revision
  QINFER_MODEL_SOURCE=--model-source
  QINFER_SERVED_MODEL_NAME=--served-model-name
  QINFER_HOST=--host
  QINFER_PORT=--port
  QINFER_DEVICE=--device
  QINFER_MAX_MODEL_LEN=--max-model-len
  QINFER_GPU_MEMORY_UTILIZATION=--gpu-memory-utilization
  QINFER_KV_CACHE_DTYPE=--kv-cache-dtype
  QINFER_MAX_NUM_SEQS=--max-num-seqs
  QINFER_MAX_NUM_BATCHED_TOKENS=--max-num-batched-tokens
  QINFER_MAX_QUEUE_LEN=--max-queue-len
  QINFER_REQUEST_TIMEOUT=--request-timeout
  QINFER_LOG_LEVEL=--log-level
)
args=()
global=()
for pair in "${flags[@]}"; do
  variable="${pair%%=*}"
  value="${!variable:-}"
  [[ -z "${value}" ]] && continue
  if [[ "${variable}" == QINFER_LOG_LEVEL ]]; then
    global=(--log-level "${value}")
  else
    args+=("${pair#*=}" "${value}")
  fi
done
exec "${bin}" "${global[@]}" serve "${args[@]}" "$@"
