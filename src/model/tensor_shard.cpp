#include "model/tensor_shard.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "util/error.h"

namespace qinfer {

namespace {

// What a shard's views point into besides the source model: its copied tensors.
struct ShardStorage {
  std::shared_ptr<const LoadedModel> source;
  std::vector<std::unique_ptr<std::byte[]>> buffers;

  std::byte* allocate(size_t bytes) {
    buffers.push_back(std::make_unique<std::byte[]>(bytes));
    return buffers.back().get();
  }
};

size_t element_bytes(const TensorView& t) { return dtype_size(t.dtype); }

// Rows [first, first + count) of a 2-D tensor, as a view into the same bytes.
TensorView row_slice(const TensorView& t, int64_t first, int64_t count) {
  TensorView slice = t;
  const size_t row_bytes = static_cast<size_t>(t.shape[1]) * element_bytes(t);
  slice.shape = {count, t.shape[1]};
  slice.data = t.data + static_cast<size_t>(first) * row_bytes;
  slice.num_bytes = static_cast<size_t>(count) * row_bytes;
  return slice;
}

// Rows [first, first + count) of a 2-D tensor copied into the shard's storage, rows at or past the tensor's end
// zero.
TensorView padded_row_slice(const TensorView& t, int64_t first, int64_t count, ShardStorage& storage) {
  if (first + count <= t.shape[0]) return row_slice(t, first, count);
  const size_t row_bytes = static_cast<size_t>(t.shape[1]) * element_bytes(t);
  TensorView slice = t;
  slice.shape = {count, t.shape[1]};
  slice.num_bytes = static_cast<size_t>(count) * row_bytes;
  std::byte* out = storage.allocate(slice.num_bytes);
  std::memset(out, 0, slice.num_bytes);
  const int64_t present = std::max<int64_t>(0, t.shape[0] - first);
  if (present > 0)
    std::memcpy(out, t.data + static_cast<size_t>(first) * row_bytes, static_cast<size_t>(present) * row_bytes);
  slice.data = out;
  return slice;
}

// Columns [first, first + count) of a 2-D tensor [rows, cols], copied: [rows, count].
TensorView column_slice(const TensorView& t, int64_t first, int64_t count, ShardStorage& storage) {
  const size_t esize = element_bytes(t);
  const int64_t rows = t.shape[0], cols = t.shape[1];
  TensorView slice = t;
  slice.shape = {rows, count};
  slice.num_bytes = static_cast<size_t>(rows * count) * esize;
  std::byte* out = storage.allocate(slice.num_bytes);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out + static_cast<size_t>(r * count) * esize, t.data + static_cast<size_t>(r * cols + first) * esize,
                static_cast<size_t>(count) * esize);
  slice.data = out;
  return slice;
}

// A dense linear of `slice`'s shape [out, in].
LinearWeight dense_linear(TensorView slice) {
  LinearWeight w;
  w.out_features = slice.shape[0];
  w.in_features = slice.shape[1];
  w.data = std::move(slice);
  return w;
}

std::string tp_prefix(int size) { return "--tensor-parallel-size " + std::to_string(size); }

}  // namespace

void check_tensor_parallel_size(const ModelConfig& config, int size) {
  if (size < 1) throw Error(ErrorKind::kInvalidArgument, tp_prefix(size) + ": must be at least 1");
  const auto require_divides = [&](int value, const char* field) {
    if (value % size != 0)
      throw Error(ErrorKind::kInvalidArgument,
                  tp_prefix(size) + " does not divide the model's " + field + " " + std::to_string(value) +
                      "; each rank holds an equal share of it (use a divisor of " + std::to_string(value) + ")");
  };
  require_divides(config.num_kv_heads, "num_key_value_heads");
  require_divides(config.num_heads, "num_attention_heads");
  require_divides(config.intermediate_size, "intermediate_size");
}

ShardSpec shard_spec(const ModelConfig& config, int rank, int size) {
  check_tensor_parallel_size(config, size);
  QINFER_CHECK(rank >= 0 && rank < size);
  ShardSpec spec;
  spec.rank = rank;
  spec.size = size;
  spec.num_heads = config.num_heads / size;
  spec.num_kv_heads = config.num_kv_heads / size;
  spec.intermediate_size = config.intermediate_size / size;
  spec.vocab_rows = (int64_t{config.vocab_size} + size - 1) / size;
  return spec;
}

LoadedModel shard_weights(std::shared_ptr<const LoadedModel> model, const ShardSpec& spec) {
  const ModelConfig& c = model->config;
  const Qwen3Weights& w = model->weights;
  if (has_quantized_linears(w))
    throw Error(ErrorKind::kUnsupported, tp_prefix(spec.size) +
                                             ": tensor parallelism splits dense (bf16/f16/f32) weights only; this "
                                             "model's linears are quantized (--tensor-parallel-size 1)");
  auto storage = std::make_shared<ShardStorage>();
  storage->source = model;

  LoadedModel shard;
  shard.config = c;
  shard.config.num_heads = spec.num_heads;
  shard.config.num_kv_heads = spec.num_kv_heads;
  shard.config.intermediate_size = spec.intermediate_size;

  const int64_t d = c.head_dim;
  const int64_t q_first = spec.rank * spec.num_heads * d, q_count = spec.num_heads * d;
  const int64_t kv_first = spec.rank * spec.num_kv_heads * d, kv_count = spec.num_kv_heads * d;
  const int64_t ff_first = int64_t{spec.rank} * spec.intermediate_size, ff_count = spec.intermediate_size;

  Qwen3Weights& s = shard.weights;
  s.embed_tokens = padded_row_slice(w.embed_tokens, spec.vocab_begin(), spec.vocab_rows, *storage);
  s.lm_head = w.lm_head.data == w.embed_tokens.data
                  ? s.embed_tokens
                  : padded_row_slice(w.lm_head, spec.vocab_begin(), spec.vocab_rows, *storage);
  s.final_norm = w.final_norm;
  for (const Qwen3LayerWeights& l : w.layers) {
    Qwen3LayerWeights& out = s.layers.emplace_back();
    out.input_norm = l.input_norm;
    out.q_norm = l.q_norm;
    out.k_norm = l.k_norm;
    out.post_attn_norm = l.post_attn_norm;
    out.q_proj = dense_linear(row_slice(l.q_proj.dense(), q_first, q_count));
    out.k_proj = dense_linear(row_slice(l.k_proj.dense(), kv_first, kv_count));
    out.v_proj = dense_linear(row_slice(l.v_proj.dense(), kv_first, kv_count));
    out.o_proj = dense_linear(column_slice(l.o_proj.dense(), q_first, q_count, *storage));
    out.gate_proj = dense_linear(row_slice(l.gate_proj.dense(), ff_first, ff_count));
    out.up_proj = dense_linear(row_slice(l.up_proj.dense(), ff_first, ff_count));
    out.down_proj = dense_linear(column_slice(l.down_proj.dense(), ff_first, ff_count, *storage));
  }
  shard.storage = std::move(storage);
  return shard;
}

}  // namespace qinfer
