#!/usr/bin/env bash
# tools/package.sh on the build folder at hand (the CPU build in CI): the package holds the binary and its bundled
# libraries, every non-system library resolves inside it with LD_LIBRARY_PATH unset, and the unpacked tarball runs.
# Usage: package_test.sh BUILD_DIR OUT_DIR
set -euo pipefail
build_dir="$1"
out_dir="$2"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rm -rf "${out_dir}"
flavour=cpu
"${build_dir}/src/cli/qinfer" --version | grep -q 'cuda(' && flavour=cuda13
bash "${repo_root}/tools/package.sh" --skip-build --build-dir "${build_dir}" --out "${out_dir}" --cpu
tarball="$(ls "${out_dir}"/qinfer-*-linux-x86_64-"${flavour}".tar.gz)"
mkdir "${out_dir}/unpacked"
tar -C "${out_dir}/unpacked" -xzf "${tarball}"
package="$(ls -d "${out_dir}"/unpacked/qinfer-*)"
# shellcheck disable=SC2016  # a literal $ORIGIN
[[ "$(readelf -d "${package}/qinfer" | grep -c 'RPATH.*\[\$ORIGIN/lib\]')" == 1 ]] || {
  echo "package test: the binary's RPATH is not \$ORIGIN/lib" >&2; exit 1; }
for lib in libcurl.so.4 libsimdjson.so.14; do
  [[ -f "${package}/lib/${lib}" ]] || { echo "package test: ${lib} is not bundled" >&2; exit 1; }
done
env -u LD_LIBRARY_PATH ldd "${package}/qinfer" "${package}/lib/libcurl.so.4" | grep -q 'not found' && {
  echo "package test: unresolved libraries" >&2; exit 1; }
resolved="$(env -u LD_LIBRARY_PATH ldd "${package}/qinfer" | grep -c "${package}/lib/")"
version="$(env -i "${package}/qinfer" --version)"
[[ "${version}" == "$(cat "${package}/VERSION")" ]] || { echo "package test: VERSION differs" >&2; exit 1; }
echo "package test: ok (${resolved} libraries from the package; ${version})"
