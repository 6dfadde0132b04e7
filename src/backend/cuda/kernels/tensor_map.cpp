#include "backend/cuda/kernels/tensor_map.h"

#include <cudaTypedefs.h>

#include "backend/cuda/cuda_check.h"
#include "util/error.h"

namespace qinfer::cuda {

namespace {

// cuTensorMapEncodeTiled of the installed driver (CUDA 12.0 signature), looked up once.
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 function = [] {
    void* pointer = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pointer, 12000, cudaEnableDefault, &status));
    QINFER_CHECK(status == cudaDriverEntryPointSuccess && pointer != nullptr,
                 "the CUDA driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(pointer);
  }();
  return function;
}

}  // namespace

CUtensorMap make_bf16_tensor_map_swizzle128(const __nv_bfloat16* base, int64_t rows, int columns, int box_rows) {
  QINFER_CHECK(rows > 0 && rows < (int64_t{1} << 32) && columns % 64 == 0 && box_rows > 0 && box_rows <= 256);
  QINFER_CHECK(reinterpret_cast<uintptr_t>(base) % 16 == 0, "tensor map base must be 16-byte aligned");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(columns), static_cast<cuuint64_t>(rows)};
  const cuuint64_t row_stride_bytes[1] = {static_cast<cuuint64_t>(columns) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result =
      encode_tiled()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(base), dims,
                     row_stride_bytes, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  QINFER_CHECK(result == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed");
  return map;
}

}  // namespace qinfer::cuda
