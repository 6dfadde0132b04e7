#include "backend/cuda/gpu_weights.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <span>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/quantized_weight_layout.h"
#include "util/error.h"
#include "util/half.h"
#include "util/logging.h"
#include "util/progress.h"
#include "util/thread_pool.h"

namespace qinfer::cuda {

namespace {

constexpr size_t kStagingBytes = 64u << 20;  // a multiple of 4: chunks split no bf16 element or packed word
constexpr size_t kAlignment = 256;

size_t align_up(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// One part of the device allocation: a dense tensor (converted to bf16 on the way) or packed quantized words.
struct UploadItem {
  const TensorView* dense = nullptr;
  const std::vector<uint32_t>* words = nullptr;
  size_t device_offset = 0;

  size_t bytes() const { return dense ? static_cast<size_t>(dense->num_elements()) * 2 : words->size() * 4; }
};

// Converts `count` elements starting at element `first` of `view` to bf16 bits.
void convert_to_bf16(const TensorView& view, size_t first, size_t count, uint16_t* out) {
  switch (view.dtype) {
    case DType::kBF16:
      std::memcpy(out, view.data + first * 2, count * 2);
      break;
    case DType::kF16: {
      const auto* src = reinterpret_cast<const uint16_t*>(view.data) + first;
      for (size_t i = 0; i < count; ++i) out[i] = float_to_bf16(fp16_to_float(src[i]));
      break;
    }
    case DType::kF32: {
      const auto* src = reinterpret_cast<const float*>(view.data) + first;
      for (size_t i = 0; i < count; ++i) out[i] = float_to_bf16(src[i]);
      break;
    }
    case DType::kF8E4M3:
    case DType::kI32:
      QINFER_CHECK(false, "only dense tensors are uploaded (quantized models are refused in upload_weights)");
  }
}

// Double-buffered host -> pinned -> device copies: the CPU fills one staging buffer while the other is in flight. The
// fill is split over the pool's threads: one thread's memcpy out of a mapped checkpoint is bound by its page faults
// (about 5 GB/s), well below what the copy engine takes.
class StagedUploader {
 public:
  StagedUploader(std::byte* device_base, cudaStream_t stream, ThreadPool& pool)
      : device_base_(device_base),
        stream_(stream),
        pool_(pool),
        staging_{PinnedBuffer(kStagingBytes, "weight staging"), PinnedBuffer(kStagingBytes, "weight staging")} {
    for (auto& event : done_) CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  ~StagedUploader() {
    for (auto& event : done_) cudaEventDestroy(event);
  }

  void upload(const UploadItem& item) {
    const size_t bytes = item.bytes();
    for (size_t first = 0; first < bytes; first += kStagingBytes) {
      const size_t count = std::min(kStagingBytes, bytes - first);
      CUDA_CHECK(cudaEventSynchronize(done_[next_]));
      fill(item, first, count, staging_[next_].as<std::byte>());
      CUDA_CHECK(cudaMemcpyAsync(device_base_ + item.device_offset + first, staging_[next_].data(), count,
                                 cudaMemcpyHostToDevice, stream_));
      CUDA_CHECK(cudaEventRecord(done_[next_], stream_));
      next_ = 1 - next_;
    }
  }

  void finish() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  // Bytes [first, first + count) of the item's device image into `out`, in slices of whole 4-byte words.
  void fill(const UploadItem& item, size_t first, size_t count, std::byte* out) {
    pool_.parallel_for(count / 4, [&](size_t begin_word, size_t end_word) {
      const size_t begin = begin_word * 4, slice = (end_word - begin_word) * 4;
      if (item.dense)
        convert_to_bf16(*item.dense, (first + begin) / 2, slice / 2, reinterpret_cast<uint16_t*>(out + begin));
      else
        std::memcpy(out + begin, reinterpret_cast<const std::byte*>(item.words->data()) + first + begin, slice);
    });
    if (count % 4 != 0) {  // a dense tensor with an odd element count: its last bf16 element
      QINFER_CHECK(item.dense != nullptr && count % 4 == 2, "packed quantized words are whole 4-byte words");
      convert_to_bf16(*item.dense, (first + count) / 2 - 1, 1, reinterpret_cast<uint16_t*>(out + count - 2));
    }
  }

  std::byte* device_base_;
  cudaStream_t stream_;
  ThreadPool& pool_;
  PinnedBuffer staging_[2];
  cudaEvent_t done_[2]{};
  int next_ = 0;
};

// Where a linear's bytes sit in the device allocation: bf16 at offset, or packed words at offset and scales at
// scales_offset.
struct LinearPlacement {
  size_t offset = 0;
  size_t scales_offset = 0;
  const PackedQuantizedLinear* packed = nullptr;
};

}  // namespace

GpuWeights upload_weights(const LoadedModel& model, cudaStream_t stream) {
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& c = model.config;
  const Qwen3Weights& w = model.weights;
  std::vector<UploadItem> items;
  size_t total = 0;
  // Packs the tensors given one after another (as bf16) and returns where the first one starts.
  auto place = [&](const std::vector<const TensorView*>& parts) {
    const size_t offset = total;
    size_t bytes = 0;
    for (const TensorView* part : parts) {
      items.push_back({.dense = part, .device_offset = offset + bytes});
      bytes += items.back().bytes();
    }
    total = align_up(total + bytes);
    return offset;
  };
  // A linear fused from `parts` along its outputs: dense parts as bf16, quantized ones repacked for the kernels.
  std::deque<PackedQuantizedLinear> packed_linears;  // stable addresses for the upload items
  ThreadPool pool(0);
  std::vector<cuda::QuantizedLinearShape> quantized_shapes;
  auto place_linear = [&](const std::vector<const qinfer::LinearWeight*>& parts) {
    LinearPlacement placement;
    if (!is_quantized(*parts.front())) {
      std::vector<const TensorView*> dense;
      for (const qinfer::LinearWeight* part : parts) {
        if (is_quantized(*part))
          throw Error(ErrorKind::kUnsupported, "CUDA backend: a fused linear mixes dense and quantized parts ('" +
                                                   parts.front()->dense().name +
                                                   "' is dense); quantize all or none of them");
        dense.push_back(&part->dense());
      }
      placement.offset = place(dense);
      return placement;
    }
    const PackedQuantizedLinear& packed = packed_linears.emplace_back(pack_quantized_linear(parts, pool));
    placement.packed = &packed;
    placement.offset = total;
    items.push_back({.words = &packed.weight, .device_offset = total});
    total = align_up(total + packed.weight.size() * 4);
    placement.scales_offset = total;
    items.push_back({.words = &packed.scales, .device_offset = total});
    total = align_up(total + packed.scales.size() * 4);
    const cuda::QuantizedLinearShape shape{packed.n, packed.k};
    if (std::find(quantized_shapes.begin(), quantized_shapes.end(), shape) == quantized_shapes.end())
      quantized_shapes.push_back(shape);
    return placement;
  };

  struct LayerOffsets {
    size_t input_norm, q_norm, k_norm, post_attn_norm;
    LinearPlacement qkv, o_proj, gate_up, down;
  };
  const size_t embed_offset = place({&w.embed_tokens});
  const bool tied = w.lm_head.data == w.embed_tokens.data;
  const size_t lm_head_offset = tied ? embed_offset : place({&w.lm_head});
  const size_t final_norm_offset = place({&w.final_norm});
  std::vector<LayerOffsets> layer_offsets;
  for (const Qwen3LayerWeights& l : w.layers) {
    LayerOffsets o;
    o.input_norm = place({&l.input_norm});
    o.qkv = place_linear({&l.q_proj, &l.k_proj, &l.v_proj});
    o.q_norm = place({&l.q_norm});
    o.k_norm = place({&l.k_norm});
    o.o_proj = place_linear({&l.o_proj});
    o.post_attn_norm = place({&l.post_attn_norm});
    o.gate_up = place_linear({&l.gate_proj, &l.up_proj});
    o.down = place_linear({&l.down_proj});
    layer_offsets.push_back(o);
  }

  GpuWeights gpu;
  gpu.storage = DeviceBuffer(total, "model weights");
  gpu.bytes = total;
  auto* base = static_cast<std::byte*>(gpu.storage.data());
  auto at = [&](size_t offset) { return reinterpret_cast<const __nv_bfloat16*>(base + offset); };
  auto words_at = [&](size_t offset) { return reinterpret_cast<const uint32_t*>(base + offset); };
  auto linear = [&](const LinearPlacement& placement, int n, int k) {
    cuda::LinearWeight weight{.n = n, .k = k};
    if (!placement.packed) {
      weight.bf16 = at(placement.offset);
      return weight;
    }
    weight.format = WeightFormat::kQuantized;
    weight.quantized = {.format = placement.packed->format,
                        .weight = words_at(placement.offset),
                        .scales = words_at(placement.scales_offset),
                        .group_size = placement.packed->group_size,
                        .n = n,
                        .k = k};
    return weight;
  };
  const int hidden = c.hidden_size, inter = c.intermediate_size;
  gpu.embed = at(embed_offset);
  gpu.vocab_rows = w.embed_tokens.shape[0];
  gpu.lm_head = cuda::LinearWeight{.bf16 = at(lm_head_offset), .n = static_cast<int>(w.lm_head.shape[0]), .k = hidden};
  gpu.quantized_shapes = std::move(quantized_shapes);
  gpu.final_norm = at(final_norm_offset);
  for (const LayerOffsets& o : layer_offsets) {
    GpuLayerWeights& l = gpu.layers.emplace_back();
    l.input_norm = at(o.input_norm);
    l.qkv = linear(o.qkv, c.q_width() + 2 * c.kv_width(), hidden);
    l.q_norm = at(o.q_norm);
    l.k_norm = at(o.k_norm);
    l.o_proj = linear(o.o_proj, hidden, c.q_width());
    l.post_attn_norm = at(o.post_attn_norm);
    l.gate_up = linear(o.gate_up, 2 * inter, hidden);
    l.down = linear(o.down, hidden, inter);
  }

  StagedUploader uploader(base, stream, pool);
  ProgressReporter progress("uploading weights", static_cast<int64_t>(total));
  for (const UploadItem& item : items) {
    uploader.upload(item);
    progress.advance(static_cast<int64_t>(item.bytes()));
  }
  uploader.finish();
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("weights on the GPU: {:.2f} GiB in {:.2f} s ({} layers, {}, linears {})",
               static_cast<double>(total) / (1u << 30), seconds, c.num_layers,
               tied ? "tied embeddings" : "separate lm_head",
               packed_linears.empty() ? "bf16" : std::string(quant_method_name(c.quantization.method)));
  return gpu;
}

}  // namespace qinfer::cuda
