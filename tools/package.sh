#!/usr/bin/env bash
# Builds the release and packs it as dist/qinfer-VERSION-linux-x86_64-cuda13.tar.gz: one directory whose binary
# starts on a machine with only the NVIDIA driver installed (glibc >= the version printed below, libstdc++).
#   qinfer                      the binary: CUDA runtime static, the chat page built in, RPATH $ORIGIN/lib
#   lib/                        every other shared library it needs (cuBLASLt, Debian's simdjson and
#                               their dependencies) and libcurl with its dependencies (loaded at run time for model
#                               downloads); lib/licenses/ holds their copyright files
#   .assets/qwen3-tokenizer/    the Qwen3 tokenizer, for the built-in demo model (`qinfer serve` without --model)
#   README.md DEPLOY.md qinfer.service VERSION
#
# Usage: tools/package.sh [--build-dir DIR] [--skip-build] [--out DIR] [--cpu]
#   --build-dir DIR  the build folder (default build-release: the full CUDA build, 3 GPU architectures)
#   --skip-build     package what DIR holds
#   --out DIR        where the directory and tarball go (default dist/)
#   --cpu            allow a build without the CUDA backend (name suffix "cpu"; used by the packaging test)
# Extra cmake configure options: QINFER_CMAKE_ARGS. Parallel jobs: JOBS (default: all cores).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${repo_root}/build-release"
out_dir="${repo_root}/dist"
skip_build=0
allow_cpu=0
while (($#)); do
  case "$1" in
    --build-dir) build_dir="$(realpath -m "$2")"; shift 2 ;;
    --out) out_dir="$(realpath -m "$2")"; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --cpu) allow_cpu=1; shift ;;
    *) echo "package: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done

if ((!skip_build)); then
  # shellcheck disable=SC2086  # QINFER_CMAKE_ARGS is a list of words
  cmake -S "${repo_root}" -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release ${QINFER_CMAKE_ARGS:-}
  cmake --build "${build_dir}" -j "${JOBS:-$(nproc)}" --target qinfer
fi
binary="${build_dir}/src/cli/qinfer"
[[ -x "${binary}" ]] || { echo "package: no binary at ${binary}" >&2; exit 3; }
version_line="$("${binary}" --version)"
version="$(sed -E 's/^qinfer ([^ ]+) .*/\1/' <<<"${version_line}")"
if [[ "${version_line}" == *"cuda("* ]]; then
  flavour=cuda13
elif ((allow_cpu)); then
  flavour=cpu
else
  echo "package: ${binary} has no CUDA backend (${version_line}); build with nvcc or pass --cpu" >&2
  exit 5
fi
name="qinfer-${version}-linux-x86_64-${flavour}"
package="${out_dir}/${name}"
rm -rf "${package}" "${package}.tar.gz"
mkdir -p "${package}/lib/licenses"

# Libraries every Linux machine has (glibc, the C++ runtime) or that come with the NVIDIA driver stay out.
system_lib='^(linux-vdso|ld-linux[^ ]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libstdc\+\+|libgcc_s|libcuda|libnvidia-[a-z-]+)\.so'
# "NAME => PATH" of every shared library `ldd FILE` resolves, one per line.
resolved_libs() { ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'; }

curl_lib="$(ldconfig -p | awk '$1 == "libcurl.so.4" { print $NF; exit }')"
[[ -n "${curl_lib}" ]] || { echo "package: libcurl.so.4 not found (apt-get install libcurl4)" >&2; exit 3; }
cp "${binary}" "${package}/qinfer"
{ resolved_libs "${binary}"; echo "libcurl.so.4 ${curl_lib}"; resolved_libs "${curl_lib}"; } | sort -u |
  while read -r soname path; do
    [[ "${soname}" =~ ${system_lib} ]] && continue
    cp -L "${path}" "${package}/lib/${soname}"
    owner="$(dpkg -S "$(realpath "${path}")" 2>/dev/null | head -1 | cut -d: -f1 || true)"
    if [[ -n "${owner}" && -f "/usr/share/doc/${owner}/copyright" ]]; then
      mkdir -p "${package}/lib/licenses/${owner}"
      cp "/usr/share/doc/${owner}/copyright" "${package}/lib/licenses/${owner}/"
    elif [[ "${soname}" == libcublas* ]]; then
      cuda_root="$(dirname "$(dirname "$(realpath "${path}")")")"
      if [[ -f "${cuda_root}/EULA.txt" ]]; then
        mkdir -p "${package}/lib/licenses/cuda"
        cp "${cuda_root}/EULA.txt" "${package}/lib/licenses/cuda/"
      fi
    fi
  done

# DT_RPATH (not RUNPATH) on the binary so that it also applies to the libraries it loads; a bundled library whose
# dependencies are bundled too finds them beside itself. ($ORIGIN is for the dynamic loader, not the shell.)
# shellcheck disable=SC2016
patchelf --force-rpath --set-rpath '$ORIGIN/lib' "${package}/qinfer"
for lib in "${package}"/lib/*.so*; do
  needs_bundled=0
  for dep in $(patchelf --print-needed "${lib}"); do [[ -e "${package}/lib/${dep}" ]] && needs_bundled=1; done
  # shellcheck disable=SC2016
  if ((needs_bundled)); then patchelf --set-rpath '$ORIGIN' "${lib}"; fi
done

if [[ -f "${repo_root}/.assets/qwen3-tokenizer/tokenizer.json" ]]; then
  mkdir -p "${package}/.assets"
  cp -r "${repo_root}/.assets/qwen3-tokenizer" "${package}/.assets/"
fi
cp "${repo_root}/README.md" "${repo_root}/docs/DEPLOY.md" "${repo_root}/deploy/systemd/qinfer.service" "${package}/"
echo "${version_line}" >"${package}/VERSION"

# Proof: with no LD_LIBRARY_PATH every non-system library resolves inside the package, and the binary starts.
missing=0
for file in "${package}/qinfer" "${package}/lib/libcurl.so.4"; do
  while read -r soname path; do
    [[ "${soname}" =~ ${system_lib} || "${path}" == "${package}/lib/"* ]] && continue
    echo "package: ${file#"${out_dir}"/} resolves ${soname} outside the package (${path})" >&2
    missing=1
  done < <(env -u LD_LIBRARY_PATH bash -c "ldd '${file}'" | awk '$2 == "=>" { print $1, $3 }')
done
((missing)) && exit 1
env -u LD_LIBRARY_PATH "${package}/qinfer" --version >/dev/null
glibc="$(objdump -T "${package}/qinfer" "${package}"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"

tar -C "${out_dir}" -czf "${package}.tar.gz" "${name}"
echo "package: ${package}.tar.gz ($(du -h "${package}.tar.gz" | cut -f1)); ${version_line}; needs ${glibc:-glibc}" \
  "and the NVIDIA driver"
