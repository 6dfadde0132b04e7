#!/usr/bin/env bash
# Installs what qinfer needs on a fresh Debian 12 machine (build tools, Debian -dev libraries, Node.js for the test
# clients, Chromium for the chat page's browser test, patchelf for tools/package.sh, and shellcheck, yamllint and
# systemd-analyze for the checks of deploy/) and fetches the test assets and the chat page's npm packages
# (tools/fetch-test-assets.sh). Safe to run again: installed packages and fetched assets are kept.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  cmake ninja-build g++ clang libclang-rt-dev pkg-config git ca-certificates python3
  nlohmann-json3-dev libutf8proc-dev libxxhash-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libboost1.81-dev libcurl4-openssl-dev libsimdjson-dev libgcrypt20-dev
  patchelf shellcheck yamllint systemd
  chromium
)
# Node.js runs the test clients; a Node.js that ships its own npm (e.g. NodeSource's) conflicts with Debian's npm, so
# the Debian packages are only asked for when the commands are missing.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

bash "${repo_root}/tools/fetch-test-assets.sh"
