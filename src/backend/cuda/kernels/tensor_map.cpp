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

// A 2-D map of `rows` rows of `columns` elements of `element_bytes` each, boxes of [box_rows, box_columns].
CUtensorMap encode_2d(CUtensorMapDataType type, int element_bytes, const void* base, int64_t rows, int columns,
                      int box_rows, int box_columns, CUtensorMapSwizzle swizzle) {
  QINFER_CHECK(rows > 0 && rows < (int64_t{1} << 32) && box_rows > 0 && box_rows <= 256);
  QINFER_CHECK(reinterpret_cast<uintptr_t>(base) % 16 == 0, "tensor map base must be 16-byte aligned");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(columns), static_cast<cuuint64_t>(rows)};
  const cuuint64_t row_stride_bytes[1] = {static_cast<cuuint64_t>(columns) * element_bytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_columns), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult result = encode_tiled()(&map, type, 2, const_cast<void*>(base), dims, row_stride_bytes, box,
                                         element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  QINFER_CHECK(result == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed");
  return map;
}

}  // namespace

CUtensorMap make_bf16_tensor_map_swizzle128(const __nv_bfloat16* base, int64_t rows, int columns, int box_rows) {
  QINFER_CHECK(columns % 64 == 0);
  return encode_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, rows, columns, box_rows, 64, CU_TENSOR_MAP_SWIZZLE_128B);
}

CUtensorMap make_u8_tensor_map_swizzle128(const uint8_t* base, int64_t rows, int box_rows) {
  return encode_2d(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, base, rows, 128, box_rows, 128, CU_TENSOR_MAP_SWIZZLE_128B);
}

}  // namespace qinfer::cuda
