#include "backend/cuda/linear_layer.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/kernels/gemv.h"
#include "backend/cuda/kernels/gemv_mma.h"
#include "backend/cuda/kernels/swiglu.h"

namespace qinfer::cuda {

namespace {

// The GEMVs for up to kGemvRowLimit rows: the tensor-core GEMV for 2-4 rows (it beats both the GEMV and cuBLASLt
// there: docs/CUDA_DESIGN.md, "Linear layers: which kernel for how many rows"), the plain GEMV for one row.
void launch_decode_linear(const GemvParams& params, const KernelStream& stream) {
  if (params.num_rows >= 2 && gemv_mma_supports(params))
    launch_gemv_mma(params, gemv_mma_default_shape(params.n), stream);
  else
    launch_gemv(params, stream);
}

}  // namespace

LinearRoute route_linears(int num_decode, DecodeAttentionKernel decode_kernel) {
  const bool register_attention = num_decode == 0 || decode_kernel == DecodeAttentionKernel::kRegisters;
  return {register_attention ? kGemvRowLimit : 1};
}

void LinearLayers::multiply(const LinearWeight& w, const __nv_bfloat16* x, int rows, void* y, bool y_fp32,
                            const LinearRoute& route, const KernelStream& stream) {
  if (rows == 0) return;
  if (w.format == WeightFormat::kQuantized) {
    if (rows <= kQuantizedGemvMaxRows)
      launch_quantized_gemv({.x = x, .weight = w.quantized, .y = y, .y_fp32 = y_fp32, .num_rows = rows}, stream);
    else if (rows <= kQuantizedGemmRouteRows && !y_fp32)
      multiply_quantized_gemm(w, x, rows, static_cast<__nv_bfloat16*>(y), false, stream);
    else
      gemm_.matmul(x, bf16_weight(w, stream), y, y_fp32, rows, w.n, w.k, stream.stream);
    return;
  }
  if (rows <= route.gemv_rows) {
    GemvParams gemv;
    gemv.x = x, gemv.weight = w.bf16, gemv.y = y, gemv.y_fp32 = y_fp32, gemv.num_rows = rows, gemv.n = w.n,
    gemv.k = w.k;
    launch_decode_linear(gemv, stream);
  } else {
    gemm_.matmul(x, w.bf16, y, y_fp32, rows, w.n, w.k, stream.stream);
  }
}

void LinearLayers::multiply_swiglu(const LinearWeight& gate_up, const __nv_bfloat16* x, int rows,
                                   __nv_bfloat16* scratch, __nv_bfloat16* y, const LinearRoute& route,
                                   const KernelStream& stream) {
  if (rows == 0) return;
  if (gate_up.format == WeightFormat::kQuantized && rows <= kQuantizedGemvMaxRows) {
    launch_quantized_gemv({.x = x, .weight = gate_up.quantized, .y = y, .num_rows = rows, .swiglu = true}, stream);
    return;
  }
  if (gate_up.format == WeightFormat::kQuantized && rows <= kQuantizedGemmRouteRows) {
    multiply_quantized_gemm(gate_up, x, rows, y, true, stream);
    return;
  }
  if (gate_up.format == WeightFormat::kBf16 && rows <= route.gemv_rows) {  // SwiGLU in the GEMV's epilogue
    GemvParams gemv;
    gemv.x = x, gemv.weight = gate_up.bf16, gemv.y = y, gemv.num_rows = rows, gemv.n = gate_up.n, gemv.k = gate_up.k;
    gemv.swiglu = true;
    launch_decode_linear(gemv, stream);
  } else {
    multiply(gate_up, x, rows, scratch, false, route, stream);
    launch_swiglu({scratch, y, rows, gate_up.n / 2}, stream);
  }
}

LinearLayers::WarmUpCounts LinearLayers::warm_up(const std::vector<GemmWarmUp>& shapes, int max_rows, int max_sequences,
                                                 const KernelStream& stream, GemmTuningCache* cache) {
  WarmUpCounts counts;
  const int first_bucket = CublasLtGemm::bucket_of(kGemvRowLimit + 1);
  for (int bucket = first_bucket;; bucket *= 2) {
    const int rows = std::min(bucket, max_rows);
    for (const GemmWarmUp& shape : shapes) {
      const LinearWeight& w = *shape.weight;
      if (shape.tune) {
        // Every bucket's algorithm is the fastest of the heuristic's first few: 3-6 % faster than the first choice
        // on the prefill shapes, 3 % on the 64-sequence decode step (docs/CUDA_DESIGN.md, "cuBLASLt").
        const bool from_cache =
            gemm_.tune(shape.x, bf16_weight(w, stream), shape.y, shape.y_fp32, rows, w.n, w.k, stream.stream, cache)
                .from_cache;
        ++(from_cache ? counts.from_cache : counts.tuned);
      } else if (bucket == first_bucket || bucket / 2 < max_sequences) {
        multiply(w, shape.x, std::min(bucket, max_sequences), shape.y, shape.y_fp32, {kGemvRowLimit}, stream);
      }
    }
    if (rows == max_rows) break;
  }
  CUDA_CHECK(cudaStreamSynchronize(stream.stream));
  return counts;
}

void LinearLayers::multiply_quantized_gemm(const LinearWeight& w, const __nv_bfloat16* x, int rows, __nv_bfloat16* y,
                                           bool swiglu, const KernelStream& stream) {
  const QuantizedGemmShape shape = quantized_gemm_default_shape();
  QINFER_CHECK(gemm_partials_.bytes() >= quantized_gemm_workspace_floats(shape, w.n, w.k, rows) * sizeof(float),
               "the quantized GEMM's partial sums are larger than their scratch");
  launch_quantized_gemm({.x = x,
                         .weight = w.quantized,
                         .y = y,
                         .num_rows = rows,
                         .swiglu = swiglu,
                         .workspace = gemm_partials_.as<float>()},
                        shape, stream);
}

LinearLayers::QuantizedScratchBytes LinearLayers::reserve_quantized_scratch(
    const std::vector<QuantizedLinearShape>& shapes) {
  size_t dequantized_elements = 0, partial_floats = 0;
  for (const QuantizedLinearShape& s : shapes) {
    dequantized_elements = std::max(dequantized_elements, static_cast<size_t>(s.n) * s.k);
    partial_floats = std::max(partial_floats, quantized_gemm_workspace_floats(quantized_gemm_default_shape(), s.n, s.k,
                                                                              kQuantizedGemmRouteRows));
  }
  if (dequantized_elements > 0)
    dequantized_ = DeviceBuffer(dequantized_elements * sizeof(__nv_bfloat16), "dequantized weight scratch");
  if (partial_floats > 0) gemm_partials_ = DeviceBuffer(partial_floats * sizeof(float), "quantized GEMM partial sums");
  return {dequantized_.bytes(), gemm_partials_.bytes()};
}

const __nv_bfloat16* LinearLayers::bf16_weight(const LinearWeight& w, const KernelStream& stream) {
  if (w.format == WeightFormat::kBf16) return w.bf16;
  QINFER_CHECK(dequantized_.bytes() >= static_cast<size_t>(w.n) * w.k * sizeof(__nv_bfloat16),
               "the dequantized weight scratch is smaller than a quantized linear");
  launch_dequantize_weight(w.quantized, dequantized_.as<__nv_bfloat16>(), stream);
  return dequantized_.as<__nv_bfloat16>();
}

}  // namespace qinfer::cuda
