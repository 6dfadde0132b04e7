#!/usr/bin/env bash
# Builds the binaries the GPU machine runs, in one or more flavours, and packs them into one archive for a GPU call.
# Usage: tools/gpu-build.sh [FLAVOUR ...]   (default: native ptx89)
#   native: CUDA for 80;89;90a, the architectures a release carries (build folder build/)
#   ptx89, ptx80: CUDA code as PTX for compute_89 / compute_80 only (build-ptx89/, build-ptx80/): the driver compiles
#     it for the GPU at load, so an H200 runs the kernels and dispatch an RTX 4090 (sm_89) or A100 (sm_80) would.
# Output: build-gpu/bundle.tar.xz holding FLAVOUR/ folders with stripped cuda_backend_tests, cuda_kernel_bench,
# nccl_communicator_tests and qinfer, and beside them the shared libraries they need that a stock GPU machine lacks (ldd; the binaries' rpath is
# $ORIGIN). On the GPU machine:
#   mkdir -p /tmp/gpu && tar -xJf build-gpu/bundle.tar.xz -C /tmp/gpu &&
#   tools/gpu-run.sh $OUT/logs native=/tmp/gpu/native ptx89=/tmp/gpu/ptx89
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
flavours=("$@")
[[ ${#flavours[@]} -eq 0 ]] && flavours=(native ptx89)
stage="$repo/build-gpu/stage"
rm -rf "$stage"
mkdir -p "$stage"
targets=(qinfer cuda_backend_tests cuda_kernel_bench nccl_communicator_tests)
# Libraries the GPU test machine has (glibc, the C++ runtime, the driver, CUDA 13's cuBLAS); anything else travels.
system_libs='^(linux-vdso|libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libnvidia-ml|libcublas|libcublasLt|libnccl)\.so'
for flavour in "${flavours[@]}"; do
  case $flavour in
    native) dir=build archs="80;89;90a" ;;
    ptx89) dir=build-ptx89 archs=89-virtual ;;
    ptx80) dir=build-ptx80 archs=80-virtual ;;
    *) echo "gpu-build: unknown flavour '$flavour' (native, ptx89, ptx80)" >&2; exit 2 ;;
  esac
  cmake -S "$repo" -B "$repo/$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$archs" >/dev/null
  cmake --build "$repo/$dir" -j "$(nproc)" --target "${targets[@]}"
  mkdir -p "$stage/$flavour"
  for target in "${targets[@]}"; do
    binary=$(find "$repo/$dir" -type f -name "$target" -perm -u+x | head -1)
    cp "$binary" "$stage/$flavour/"
    strip "$stage/$flavour/$target"
    ldd "$binary" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
      [[ $name =~ $system_libs ]] || cp -n "$path" "$stage/$flavour/"
    done
  done
done
tar -C "$stage" -cJf "$repo/build-gpu/bundle.tar.xz" "${flavours[@]}"
rm -rf "$stage"
ls -l "$repo/build-gpu/bundle.tar.xz"
