#!/usr/bin/env bash
# Installs the chat page's npm packages into web/node_modules with `npm ci` (exact versions from web/package-lock.json):
#   markdown-it      its browser build is embedded into the qinfer binary (web/web_assets.cmake)
#   playwright-core  drives Debian's /usr/bin/chromium in the browser test (tests/web); downloads no browser
# Idempotent: skipped while web/node_modules matches the lock file. Called by tools/fetch-test-assets.sh.
set -euo pipefail

web_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../web" && pwd)"
installed_lock="${web_dir}/node_modules/.package-lock.json"

if ! command -v npm >/dev/null; then
  echo "fetch-web-deps: npm is not installed (Debian: apt-get install npm)" >&2
  exit 1
fi
if [[ -f "${installed_lock}" && "${installed_lock}" -nt "${web_dir}/package-lock.json" ]]; then
  echo "fetch-web-deps: ${web_dir}/node_modules is up to date"
  exit 0
fi
if ! (cd "${web_dir}" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --silent --no-audit --no-fund); then
  echo "fetch-web-deps: npm ci in ${web_dir} failed; npm needs its registry (offline?). Re-run with network access." >&2
  exit 1
fi
echo "fetch-web-deps: installed the packages of ${web_dir}/package-lock.json"
