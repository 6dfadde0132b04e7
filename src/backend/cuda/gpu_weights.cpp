#include "backend/cuda/gpu_weights.h"

#include <chrono>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "util/half.h"
#include "util/logging.h"
#include "util/progress.h"

namespace qinfer::cuda {

namespace {

constexpr size_t kStagingBytes = 64u << 20;
constexpr size_t kAlignment = 256;

size_t align_up(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// One source tensor and where its bf16 copy goes in the device allocation.
struct UploadItem {
  const TensorView* source;
  size_t device_offset;
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
  }
}

// Double-buffered host -> pinned -> device copies: the CPU fills one staging buffer while the other is in flight.
class StagedUploader {
 public:
  StagedUploader(std::byte* device_base, cudaStream_t stream)
      : device_base_(device_base),
        stream_(stream),
        staging_{PinnedBuffer(kStagingBytes, "weight staging"), PinnedBuffer(kStagingBytes, "weight staging")} {
    for (auto& event : done_) CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  }
  ~StagedUploader() {
    for (auto& event : done_) cudaEventDestroy(event);
  }

  void upload(const TensorView& view, size_t device_offset) {
    const size_t elements = static_cast<size_t>(view.num_elements());
    const size_t chunk_elements = kStagingBytes / 2;
    for (size_t first = 0; first < elements; first += chunk_elements) {
      const size_t count = std::min(chunk_elements, elements - first);
      CUDA_CHECK(cudaEventSynchronize(done_[next_]));
      convert_to_bf16(view, first, count, staging_[next_].as<uint16_t>());
      CUDA_CHECK(cudaMemcpyAsync(device_base_ + device_offset + first * 2, staging_[next_].data(), count * 2,
                                 cudaMemcpyHostToDevice, stream_));
      CUDA_CHECK(cudaEventRecord(done_[next_], stream_));
      next_ = 1 - next_;
    }
  }

  void finish() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  std::byte* device_base_;
  cudaStream_t stream_;
  PinnedBuffer staging_[2];
  cudaEvent_t done_[2]{};
  int next_ = 0;
};

}  // namespace

GpuWeights upload_weights(const LoadedModel& model, cudaStream_t stream) {
  const auto start = std::chrono::steady_clock::now();
  const ModelConfig& c = model.config;
  const Qwen3Weights& w = model.weights;
  std::vector<UploadItem> items;
  size_t total = 0;
  // Packs the tensors given one after another (as bf16) and returns where the first one starts.
  auto place = [&](std::initializer_list<const TensorView*> parts) {
    const size_t offset = total;
    size_t bytes = 0;
    for (const TensorView* part : parts) {
      items.push_back({part, offset + bytes});
      bytes += static_cast<size_t>(part->num_elements()) * 2;
    }
    total = align_up(total + bytes);
    return offset;
  };

  struct LayerOffsets {
    size_t input_norm, qkv, q_norm, k_norm, o_proj, post_attn_norm, gate_up, down;
  };
  const size_t embed_offset = place({&w.embed_tokens});
  const bool tied = w.lm_head.data == w.embed_tokens.data;
  const size_t lm_head_offset = tied ? embed_offset : place({&w.lm_head});
  const size_t final_norm_offset = place({&w.final_norm});
  std::vector<LayerOffsets> layer_offsets;
  for (const Qwen3LayerWeights& l : w.layers) {
    LayerOffsets o;
    o.input_norm = place({&l.input_norm});
    o.qkv = place({&l.q_proj, &l.k_proj, &l.v_proj});
    o.q_norm = place({&l.q_norm});
    o.k_norm = place({&l.k_norm});
    o.o_proj = place({&l.o_proj});
    o.post_attn_norm = place({&l.post_attn_norm});
    o.gate_up = place({&l.gate_proj, &l.up_proj});
    o.down = place({&l.down_proj});
    layer_offsets.push_back(o);
  }

  GpuWeights gpu;
  gpu.storage = DeviceBuffer(total, "model weights");
  gpu.bytes = total;
  auto* base = static_cast<std::byte*>(gpu.storage.data());
  auto at = [&](size_t offset) { return reinterpret_cast<const __nv_bfloat16*>(base + offset); };
  auto linear = [&](size_t offset, int n, int k) { return LinearWeight{WeightFormat::kBf16, at(offset), n, k}; };
  const int hidden = c.hidden_size, inter = c.intermediate_size;
  gpu.embed = at(embed_offset);
  gpu.lm_head = linear(lm_head_offset, c.vocab_size, hidden);
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

  StagedUploader uploader(base, stream);
  ProgressReporter progress("uploading weights", static_cast<int64_t>(total));
  for (const UploadItem& item : items) {
    uploader.upload(*item.source, item.device_offset);
    progress.advance(item.source->num_elements() * 2);
  }
  uploader.finish();
  progress.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("weights on the GPU: {:.2f} GiB in {:.2f} s ({} layers, {})", static_cast<double>(total) / (1u << 30),
               seconds, c.num_layers, tied ? "tied embeddings" : "separate lm_head");
  return gpu;
}

}  // namespace qinfer::cuda
