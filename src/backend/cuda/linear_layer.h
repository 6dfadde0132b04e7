// Linear layers: a weight on the device and how it is multiplied, y[rows, n] = x[rows, k] · Wᵀ with bf16
// activations. The weight's format and the step's row count decide the kernel, in one place (LinearLayers::multiply):
// bf16 weights take the GEMV for one row, the tensor-core GEMV for 2-4 rows next to the register decode attention
// (route_linears), cuBLASLt beyond; quantized weights (int4, fp8) take the quantized tensor-core GEMV up to
// kQuantizedGemvMaxRows rows, the quantized GEMM up to kQuantizedGemmRouteRows,
// and beyond are dequantized to bf16 into a scratch matrix that cuBLASLt multiplies.
// Tensor-parallel shards would be a further format.
#pragma once

#include <cuda_bf16.h>

#include <vector>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_capabilities.h"
#include "backend/cuda/kernels/decode_attention/plan.h"
#include "backend/cuda/kernels/quantized_gemm.h"
#include "backend/cuda/kernels/quantized_gemv.h"

namespace qinfer::cuda {

enum class WeightFormat { kBf16, kQuantized };

// The most rows a quantized linear runs on the quantized GEMM; more go to dequantize + cuBLASLt, which is faster
// from 128 rows on the 4B's linears (docs/CUDA_DESIGN.md, "Quantized linears").
inline constexpr int kQuantizedGemmRouteRows = kQuantizedGemmMaxRows;

// A quantized linear's shape, for sizing the scratch its kernels need.
struct QuantizedLinearShape {
  int n = 0;
  int k = 0;
  bool operator==(const QuantizedLinearShape&) const = default;
};

struct LinearWeight {
  WeightFormat format = WeightFormat::kBf16;
  const __nv_bfloat16* bf16 = nullptr;  // kBf16: [n, k] row-major
  QuantizedWeightView quantized{};      // kQuantized: packed int4 or fp8 (quantized_weight_layout.h)
  int n = 0;                            // output features
  int k = 0;                            // input features
};

// The most rows a step's linears run on the GEMVs (more rows go to cuBLASLt), from the step's decode attention kernel
// (docs/CUDA_DESIGN.md, "Linear layers: which kernel for how many rows": the tensor-core GEMV wins at 2-4 rows only
// next to the register decode attention; next to a ring kernel it makes the step slower, so such steps keep the GEMV to
// one row).
struct LinearRoute {
  int gemv_rows = 0;
};
LinearRoute route_linears(int num_decode, DecodeAttentionKernel decode_kernel);

// The GEMVs' row limit: at one row the GEMV beats cuBLASLt, at two to four the tensor-core GEMV does; from five rows
// cuBLASLt wins end to end.
inline constexpr int kGemvRowLimit = 4;
static_assert(kGemvRowLimit <= kDecodeAttentionRegisterBatch);

// A shape whose cuBLASLt algorithms are chosen at start-up: x [rows, k] from `x`, output into `y`.
struct GemmWarmUp {
  const LinearWeight* weight = nullptr;
  const __nv_bfloat16* x = nullptr;
  void* y = nullptr;
  bool y_fp32 = false;
  bool tune = true;  // time the heuristic's first candidates (else take its first choice)
};

class LinearLayers {
 public:
  // y = x · Wᵀ: [rows, n], fp32 when y_fp32, else bf16. Enqueues on the stream only (capturable).
  void multiply(const LinearWeight& weight, const __nv_bfloat16* x, int rows, void* y, bool y_fp32,
                const LinearRoute& route, const KernelStream& stream);

  // weight = [gate; up] ([2 * inter, k]): y = silu(x · gateᵀ) * (x · upᵀ), [rows, inter] bf16 rounded as HF does.
  // On the GEMVs SwiGLU is their epilogue; on cuBLASLt the product goes to `scratch` [rows, 2 * inter] and the SwiGLU
  // kernel follows.
  void multiply_swiglu(const LinearWeight& gate_up, const __nv_bfloat16* x, int rows, __nv_bfloat16* scratch,
                       __nv_bfloat16* y, const LinearRoute& route, const KernelStream& stream);

  // CUDA loads kernel modules lazily: the first launch of each cuBLASLt kernel costs milliseconds, which a request
  // would otherwise pay as TTFT the first time its token count falls in a new bucket. Choosing (and timing) the
  // algorithms of every row bucket from kGemvRowLimit + 1 up to max_rows loads them all at start-up. `max_sequences`
  // bounds the rows of shapes with tune == false (lm_head: one row per sampled sequence). Choices found in `cache`
  // are taken without timing, and timed ones are stored in it (CublasLtGemm::tune). Synchronises the stream.
  struct WarmUpCounts {
    int tuned = 0;       // timed now
    int from_cache = 0;  // taken from the cache
  };
  WarmUpCounts warm_up(const std::vector<GemmWarmUp>& shapes, int max_rows, int max_sequences,
                       const KernelStream& stream, GemmTuningCache* cache);

  // Allocates what the quantized linears of these shapes need (none: nothing): the bf16 matrix they are dequantized
  // into for cuBLASLt and the quantized GEMM's k-split partial sums. Returns the bytes of each.
  struct QuantizedScratchBytes {
    size_t dequantized = 0;
    size_t gemm_partials = 0;
  };
  QuantizedScratchBytes reserve_quantized_scratch(const std::vector<QuantizedLinearShape>& shapes);

 private:
  // The weight as bf16 [n, k]: its own bytes, or (quantized) dequantized into dequantized_ on the stream.
  const __nv_bfloat16* bf16_weight(const LinearWeight& weight, const KernelStream& stream);

  // Quantized weights on the quantized GEMM (rows <= kQuantizedGemmRouteRows).
  void multiply_quantized_gemm(const LinearWeight& weight, const __nv_bfloat16* x, int rows, __nv_bfloat16* y,
                               bool swiglu, const KernelStream& stream);

  CublasLtGemm gemm_;
  DeviceBuffer dequantized_;
  DeviceBuffer gemm_partials_;
};

}  // namespace qinfer::cuda
