#!/usr/bin/env bash
# Checks the deployment files with what runs without a container engine: shellcheck on the scripts, systemd-analyze
# verify on the unit (any warning fails), yamllint on the YAML, the Dockerfile's required parts (hadolint is not in
# Debian), and that every flag the container entry point builds from the environment is a flag `qinfer` accepts.
# Usage: check_deploy_files.sh QINFER_BINARY
set -euo pipefail
bin="$1"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
deploy="${repo_root}/deploy"
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
fail() { echo "deploy check: $*" >&2; exit 1; }

shellcheck "${deploy}/docker-entrypoint.sh" "${repo_root}/tools/package.sh" "${BASH_SOURCE[0]}" \
  "${repo_root}/tests/deploy/package_test.sh"

# The unit with its ExecStart pointing at the built binary (verify checks the path is executable).
sed "s#/opt/qinfer/qinfer#${bin}#" "${deploy}/systemd/qinfer.service" >"${tmp}/qinfer.service"
report="$(systemd-analyze verify "${tmp}/qinfer.service" 2>&1)" || fail "systemd-analyze verify failed: ${report}"
[[ -z "${report}" ]] || fail "systemd-analyze verify: ${report}"

yamllint -d '{extends: default, rules: {line-length: {max: 120}, document-start: disable, truthy: {check-keys: false}}}' \
  "${deploy}"/compose.yaml "${deploy}"/prometheus/*.yml "${deploy}"/grafana/provisioning/*/*.yaml

dockerfile="${deploy}/Dockerfile"
grep -Eq '^ARG CUDA_IMAGE=nvidia/cuda:[0-9.]+-runtime-' "${dockerfile}" || fail "Dockerfile: not on a CUDA runtime image"
grep -Eq '^USER qinfer$' "${dockerfile}" || fail "Dockerfile: does not run as the non-root user qinfer"
grep -Eq '^VOLUME \["/data"\]$' "${dockerfile}" || fail "Dockerfile: no /data volume for the model cache"
grep -Eq '^ENV HF_HOME=/data/' "${dockerfile}" || fail "Dockerfile: the HF cache is not on the volume"
grep -Eq 'CMD curl -fsS "http://127.0.0.1:\$\{QINFER_PORT\}/health"' "${dockerfile}" || fail "Dockerfile: no /health check"
grep -Eq '^ENTRYPOINT \["/opt/qinfer/docker-entrypoint.sh"\]$' "${dockerfile}" || fail "Dockerfile: entry point"

# Every variable of the entry point set to a marker: each flag it passes must be one qinfer documents.
env_args="$(env -i PATH="${PATH}" QINFER_BIN=echo bash -c "$(sed -n 's/^  \(QINFER_[A-Z_]*\)=--.*/export \1=x;/p' \
  "${deploy}/docker-entrypoint.sh") exec bash '${deploy}/docker-entrypoint.sh'")"
help="$("${bin}" --help; "${bin}" serve --help)"
while read -r flag; do
  grep -q -- " ${flag}\b" <<<"${help}" || fail "the entry point passes ${flag}, which qinfer does not know"
done < <(grep -o -- '--[a-z-]*' <<<"${env_args}")
echo "deploy check: ok ($(wc -w <<<"${env_args}") entry-point words checked)"
