#include "backend/cuda/kv_pool.h"

#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "util/error.h"

namespace qinfer::cuda {

std::string format_gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / (1u << 30));
  return text;
}

void KvLayerView::bind(QkNormRopeCacheWriteParams& p) const {
  p.k_cache = k, p.v_cache = v;
  p.k_fp8 = k_fp8, p.v_fp8 = v_fp8, p.k_scales = k_scales, p.v_scales = v_scales;
}

void KvLayerView::bind(DecodeAttentionParams& p) const {
  p.kv_dtype = dtype;
  p.k_cache = k, p.v_cache = v;
  p.k_fp8 = k_fp8, p.v_fp8 = v_fp8, p.k_scales = k_scales, p.v_scales = v_scales;
}

void KvLayerView::bind(PrefillAttentionParams& p) const {
  QINFER_CHECK(dtype == KvCacheDtype::kBf16, "prefill attention reads an fp8 cache through its bf16 scratch");
  p.k_cache = k, p.v_cache = v;
}

void KvLayerView::bind(KvDequantGatherParams& p) const {
  QINFER_CHECK(dtype == KvCacheDtype::kFp8E4m3, "only an fp8 cache is dequantised");
  p.k_cache = k_fp8, p.v_cache = v_fp8, p.k_scales = k_scales, p.v_scales = v_scales;
}

KvPool::KvPool(const ModelConfig& c, const KvPoolOptions& options, const std::vector<MemoryPart>& allocated) {
  const bool fp8_cache = options.dtype == KvCacheDtype::kFp8E4m3;
  const int64_t blocks_needed = (options.max_model_len + options.block_size - 1) / options.block_size;
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // A block of one layer's K or V is num_kv_heads * block_size vectors of head_dim elements (bf16, or E4M3 plus an
  // fp32 scale).
  const size_t block_bytes = static_cast<size_t>(c.num_layers) * 2 * c.num_kv_heads * options.block_size *
                             static_cast<size_t>(kv_cache_vector_bytes(options.dtype, c.head_dim));
  const double used = static_cast<double>(total_bytes - free_bytes);
  // The visible blocks plus the scratch block must fit; a draft beside this pool pays for its KV per block.
  const double budget =
      options.num_blocks > 0       ? static_cast<double>(options.num_blocks + 1) * static_cast<double>(block_bytes)
      : options.kv_cache_bytes > 0 ? static_cast<double>(options.kv_cache_bytes)
                                   : options.gpu_memory_utilization * static_cast<double>(total_bytes) - used -
                                         static_cast<double>(options.draft_reserved_bytes);
  const double bytes_per_block =
      static_cast<double>(block_bytes + static_cast<size_t>(options.draft_kv_bytes_per_block));
  const int64_t num_blocks = options.num_blocks > 0 ? options.num_blocks
                             : budget > 0           ? static_cast<int64_t>(budget / bytes_per_block) - 1
                                                    : 0;
  const std::string dtype_name = kv_cache_dtype_name(options.dtype);
  if (num_blocks < blocks_needed || budget > static_cast<double>(free_bytes)) {
    std::string parts;
    for (const MemoryPart& part : allocated)
      parts += (parts.empty() ? "" : ", ") + part.name + " " + format_gib(static_cast<double>(part.bytes));
    throw Error(ErrorKind::kOutOfMemory,
                "KV cache (" + dtype_name + ") does not fit: one sequence of max_model_len " +
                    std::to_string(options.max_model_len) + " needs " +
                    format_gib(static_cast<double>(blocks_needed) * static_cast<double>(block_bytes)) +
                    ", the budget is " + format_gib(std::max(0.0, budget)) + " (gpu_memory_utilization " +
                    std::to_string(options.gpu_memory_utilization) + " of " +
                    format_gib(static_cast<double>(total_bytes)) + ", in use " + format_gib(used) + ": " + parts +
                    "; free " + format_gib(static_cast<double>(free_bytes)) +
                    "). Lower --max-model-len, raise --gpu-memory-utilization or set --kv-cache-memory-bytes (which "
                    "replaces the utilisation budget)" +
                    (fp8_cache ? "." : ", or use --kv-cache-dtype fp8 (half the bytes per token)."));
  }
  device_total_bytes_ = static_cast<int64_t>(total_bytes);
  budget_bytes_ =
      static_cast<int64_t>(options.kv_cache_bytes > 0 ? used + budget : options.gpu_memory_utilization * total_bytes);
  layer_vectors_ = static_cast<size_t>(num_blocks + 1) * c.num_kv_heads * options.block_size;
  layer_elements_ = layer_vectors_ * c.head_dim;
  pool_ = DeviceBuffer(layer_elements_ * 2 * c.num_layers * (fp8_cache ? 1 : sizeof(__nv_bfloat16)), "KV cache");
  if (fp8_cache) scales_ = DeviceBuffer(layer_vectors_ * 2 * c.num_layers * 4, "fp8 KV cache scales");
  shape_ = {num_blocks, options.block_size, static_cast<int64_t>(pool_.bytes() + scales_.bytes()), options.dtype};
}

KvLayerView KvPool::layer(int layer) const {
  KvLayerView view;
  view.dtype = shape_.dtype;
  const size_t k_part = 2 * static_cast<size_t>(layer), v_part = k_part + 1;
  if (fp8()) {
    view.k_fp8 = pool_.as<uint8_t>() + k_part * layer_elements_;
    view.v_fp8 = pool_.as<uint8_t>() + v_part * layer_elements_;
    view.k_scales = scales_.as<float>() + k_part * layer_vectors_;
    view.v_scales = scales_.as<float>() + v_part * layer_vectors_;
  } else {
    view.k = pool_.as<__nv_bfloat16>() + k_part * layer_elements_;
    view.v = pool_.as<__nv_bfloat16>() + v_part * layer_elements_;
  }
  return view;
}

}  // namespace qinfer::cuda
