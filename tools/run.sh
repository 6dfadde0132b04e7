#!/usr/bin/env bash
# The main job: install what is missing, build, and serve the OpenAI API (http://127.0.0.1:8000) with the built-in demo
# model on the CPU, or with the model in QINFER_MODEL (a directory or ORG/NAME in the HF cache). Extra args go to serve.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "${repo_root}/tools/setup.sh"
bash "${repo_root}/tools/build.sh"
model_args=()
[[ -n "${QINFER_MODEL:-}" ]] && model_args=(--model "${QINFER_MODEL}")
exec "${repo_root}/build/src/cli/qinfer" serve "${model_args[@]}" "$@"
