#!/usr/bin/env bash
# The main job: install what is missing, build, and run qinfer on the embedded demo model (or the model in QINFER_MODEL).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "${repo_root}/tools/setup.sh"
bash "${repo_root}/tools/build.sh"
model_args=()
[[ -n "${QINFER_MODEL:-}" ]] && model_args=(--model "${QINFER_MODEL}")
exec "${repo_root}/build/src/cli/qinfer" generate "${model_args[@]}" --prompt "Write a haiku about GPUs." --max-tokens 32 "$@"
