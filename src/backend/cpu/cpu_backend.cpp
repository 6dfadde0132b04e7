#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_ops.h"
#include "util/byte_size.h"
#include "util/error.h"

namespace qinfer {

namespace {

constexpr int64_t kDefaultKvBytes = int64_t{2} << 30;

// Bytes of every weight tensor as stored (the tied lm_head is the embedding, counted once).
int64_t weight_bytes(const Qwen3Weights& w) {
  int64_t bytes = static_cast<int64_t>(w.embed_tokens.num_bytes + w.final_norm.num_bytes);
  if (w.lm_head.data != w.embed_tokens.data) bytes += static_cast<int64_t>(w.lm_head.num_bytes);
  for (const Qwen3LayerWeights& l : w.layers) {
    for (const TensorView* t : {&l.input_norm, &l.q_norm, &l.k_norm, &l.post_attn_norm})
      bytes += static_cast<int64_t>(t->num_bytes);
    for (const LinearWeight* t : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      bytes += static_cast<int64_t>(t->stored_bytes());
  }
  return bytes;
}

// fp32 buffers of forward_logits for a step of `tokens` tokens and `samples` sampled sequences: the residual, norm
// and projection rows per token, and the logits per sample.
int64_t activation_bytes(const ModelConfig& c, int64_t tokens, int64_t samples) {
  const int64_t per_token = 3 * int64_t{c.hidden_size} + 2 * c.q_width() + 2 * c.kv_width() + 2 * c.intermediate_size;
  return int64_t{sizeof(float)} * (tokens * per_token + samples * (c.vocab_size + c.hidden_size));
}

}  // namespace

CpuBackend::CpuBackend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options,
                       std::optional<CpuTensorParallelRank> rank)
    : model_(std::move(model)), pool_(options.num_threads), rank_(rank) {
  const ModelConfig& c = model_->config;
  if (options.block_size <= 0 || options.block_size > 1024)
    throw Error(ErrorKind::kInvalidArgument,
                "block size must be in [1, 1024], got " + std::to_string(options.block_size));
  max_model_len_ = options.max_model_len > 0 ? options.max_model_len : static_cast<int>(c.max_position_embeddings);
  if (max_model_len_ > c.max_position_embeddings)
    throw Error(ErrorKind::kInvalidArgument, "--max-model-len " + std::to_string(max_model_len_) +
                                                 " exceeds the model's max_position_embeddings " +
                                                 std::to_string(c.max_position_embeddings));
  const int64_t bytes_per_block =
      CpuKvCache::block_bytes(options.kv_cache_dtype, c.num_layers, options.block_size, c.num_kv_heads, c.head_dim);
  int64_t bytes = options.kv_cache_bytes > 0 ? options.kv_cache_bytes : kDefaultKvBytes;
  const int64_t blocks_per_seq = (max_model_len_ + options.block_size - 1) / options.block_size;
  int64_t num_blocks = options.kv_cache_num_blocks > 0
                           ? options.kv_cache_num_blocks
                           : std::min(bytes / (bytes_per_block + options.draft_kv_bytes_per_block),
                                      blocks_per_seq * std::max(1, options.max_num_seqs));
  if (num_blocks < 1)
    throw Error(ErrorKind::kOutOfMemory, "KV cache of " + format_bytes(bytes) + " holds no block of " +
                                             format_bytes(bytes_per_block) + "; raise --kv-cache-memory-bytes");
  kv_shape_ = {num_blocks, options.block_size, num_blocks * bytes_per_block, options.kv_cache_dtype};
  kv_cache_ = std::make_unique<CpuKvCache>(options.kv_cache_dtype, c.num_layers, num_blocks, options.block_size,
                                           c.num_kv_heads, c.head_dim);
  memory_plan_.weights = weight_bytes(model_->weights);
  memory_plan_.activations = activation_bytes(c, options.max_num_batched_tokens, options.max_num_seqs);
  memory_plan_.kv = kv_shape_;
  inv_freq_.resize(static_cast<size_t>(c.head_dim / 2));
  cpu::rope_inv_freq(c.rope_theta, c.head_dim, inv_freq_.data());
}

void CpuBackend::write_kv(const Batch& batch, int layer, const float* k, const float* v) {
  const int kv_width = model_->config.kv_width();
  const int bs = kv_shape_.block_size;
  size_t t = 0;
  for (const BatchSequence& s : batch.sequences) {
    for (int i = 0; i < s.num_tokens; ++i, ++t) {
      const int64_t pos = static_cast<int64_t>(s.num_cached) + i;
      const int64_t block = s.block_table[static_cast<size_t>(pos / bs)];
      const int offset = static_cast<int>(pos % bs);
      kv_cache_->write(layer, CpuKvCache::Part::kKey, block, offset, k + t * kv_width);
      kv_cache_->write(layer, CpuKvCache::Part::kValue, block, offset, v + t * kv_width);
    }
  }
}

void CpuBackend::attention_layer(const Batch& batch, int layer, const std::vector<int64_t>& token_positions,
                                 const float* q, float* out) {
  const ModelConfig& c = model_->config;
  const int d = c.head_dim, group = c.num_heads / c.num_kv_heads;
  const int bs = kv_shape_.block_size;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // token -> its sequence's block table
  std::vector<const BatchSequence*> owner;
  for (const BatchSequence& s : batch.sequences) owner.insert(owner.end(), static_cast<size_t>(s.num_tokens), &s);
  const size_t tasks = owner.size() * static_cast<size_t>(c.num_heads);
  pool_.parallel_for(tasks, [&](size_t begin, size_t end) {
    std::vector<float> scores;
    std::vector<double> acc(static_cast<size_t>(d));
    std::vector<float> dequantized(static_cast<size_t>(d));  // one K or V vector read from an fp8 cache
    for (size_t task = begin; task < end; ++task) {
      const size_t t = task / static_cast<size_t>(c.num_heads);
      const int h = static_cast<int>(task % static_cast<size_t>(c.num_heads));
      const int g = h / group;
      const int64_t pos = token_positions[t];
      const float* qh = q + t * static_cast<size_t>(c.q_width()) + static_cast<size_t>(h) * d;
      const auto& table = owner[t]->block_table;
      scores.resize(static_cast<size_t>(pos + 1));
      float max_score = -INFINITY;
      for (int64_t j = 0; j <= pos; ++j) {
        const float* kj = kv_cache_->read(layer, CpuKvCache::Part::kKey, table[static_cast<size_t>(j / bs)],
                                          static_cast<int>(j % bs), g, dequantized.data());
        scores[static_cast<size_t>(j)] = cpu::dot(qh, kj, d) * scale;
        max_score = std::max(max_score, scores[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (float& s : scores) sum += s = std::exp(s - max_score);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j <= pos; ++j) {
        const float* vj = kv_cache_->read(layer, CpuKvCache::Part::kValue, table[static_cast<size_t>(j / bs)],
                                          static_cast<int>(j % bs), g, dequantized.data());
        const double w = scores[static_cast<size_t>(j)];
        for (int i = 0; i < d; ++i) acc[static_cast<size_t>(i)] += w * vj[i];
      }
      float* o = out + t * static_cast<size_t>(c.q_width()) + static_cast<size_t>(h) * d;
      for (int i = 0; i < d; ++i) o[i] = static_cast<float>(acc[static_cast<size_t>(i)] / sum);
    }
  });
}

std::vector<float> CpuBackend::forward_logits(const Batch& batch) {
  validate_batch(batch, model_->config, kv_shape_, max_model_len_, /*multi_position_sampling=*/true);
  const ModelConfig& c = model_->config;
  const Qwen3Weights& w = model_->weights;
  const int h = c.hidden_size, qw = c.q_width(), kvw = c.kv_width(), ff = c.intermediate_size, d = c.head_dim;
  const int n = static_cast<int>(batch.token_ids.size());
  const float eps = static_cast<float>(c.rms_norm_eps);
  const auto sz = [](int64_t a, int64_t b) { return static_cast<size_t>(a * b); };

  std::vector<int64_t> positions;  // [n]
  for (const BatchSequence& s : batch.sequences)
    for (int i = 0; i < s.num_tokens; ++i) positions.push_back(static_cast<int64_t>(s.num_cached) + i);

  std::vector<float> x(sz(n, h));  // [n, hidden] residual stream
  embed(batch.token_ids, x.data());

  std::vector<float> normed(sz(n, h)), q(sz(n, qw)), k(sz(n, kvw)), v(sz(n, kvw)), attn(sz(n, qw)), proj(sz(n, h));
  std::vector<float> gate(sz(n, ff)), up(sz(n, ff));
  for (int l = 0; l < c.num_layers; ++l) {
    const Qwen3LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    cpu::rms_norm(x.data(), lw.input_norm, n, h, eps, normed.data());
    cpu::linear(pool_, normed.data(), n, lw.q_proj, q.data());
    cpu::linear(pool_, normed.data(), n, lw.k_proj, k.data());
    cpu::linear(pool_, normed.data(), n, lw.v_proj, v.data());
    // Per-head q/k RMSNorm (weights shared across heads), then RoPE.
    cpu::rms_norm(q.data(), lw.q_norm, n * c.num_heads, d, eps, q.data());
    cpu::rms_norm(k.data(), lw.k_norm, n * c.num_kv_heads, d, eps, k.data());
    for (int t = 0; t < n; ++t) {
      for (int hd = 0; hd < c.num_heads; ++hd)
        cpu::apply_rope(&q[sz(t, qw) + sz(hd, d)], d, positions[static_cast<size_t>(t)], inv_freq_);
      for (int hd = 0; hd < c.num_kv_heads; ++hd)
        cpu::apply_rope(&k[sz(t, kvw) + sz(hd, d)], d, positions[static_cast<size_t>(t)], inv_freq_);
    }
    write_kv(batch, l, k.data(), v.data());
    attention_layer(batch, l, positions, q.data(), attn.data());
    cpu::linear(pool_, attn.data(), n, lw.o_proj, proj.data());
    reduce_partial(proj);
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];

    cpu::rms_norm(x.data(), lw.post_attn_norm, n, h, eps, normed.data());
    cpu::linear(pool_, normed.data(), n, lw.gate_proj, gate.data());
    cpu::linear(pool_, normed.data(), n, lw.up_proj, up.data());
    cpu::swiglu(gate.data(), up.data(), static_cast<int64_t>(gate.size()), gate.data());
    cpu::linear(pool_, gate.data(), n, lw.down_proj, proj.data());
    reduce_partial(proj);
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
  }

  // Final norm and lm_head only at the sampled positions: the last of each sampling sequence, or all of its positions
  // with sample_all_positions.
  std::vector<float> last;  // [num_sampled, hidden]
  int64_t end = 0;
  for (const BatchSequence& s : batch.sequences) {
    end += s.num_tokens;
    const int64_t first = end - s.num_samples();
    last.insert(last.end(), x.begin() + sz(first, h), x.begin() + sz(end, h));
  }
  const int num_sampled = static_cast<int>(last.size() / static_cast<size_t>(h));
  cpu::rms_norm(last.data(), w.final_norm, num_sampled, h, eps, last.data());
  return lm_head_logits(last, num_sampled);
}

void CpuBackend::embed(std::span<const int32_t> token_ids, float* x) {
  const TensorView& table = model_->weights.embed_tokens;
  const size_t h = static_cast<size_t>(model_->config.hidden_size);
  for (size_t t = 0; t < token_ids.size(); ++t) {
    const int64_t row = rank_ ? token_ids[t] - rank_->spec.vocab_begin() : token_ids[t];
    if (row >= 0 && row < table.shape[0])
      cpu::load_weight_row(table, row, x + t * h);
    else  // another rank's token: its owner contributes the row to the sum
      std::fill_n(x + t * h, h, 0.0f);
  }
  if (rank_) rank_->communicator->all_reduce_sum(x, token_ids.size() * h, CommDtype::kF32);
}

void CpuBackend::reduce_partial(std::vector<float>& partial) {
  if (rank_) rank_->communicator->all_reduce_sum(partial.data(), partial.size(), CommDtype::kF32);
}

std::vector<float> CpuBackend::lm_head_logits(const std::vector<float>& last, int num_sampled) {
  const TensorView& lm_head = model_->weights.lm_head;
  const size_t vocab = static_cast<size_t>(model_->config.vocab_size), samples = static_cast<size_t>(num_sampled);
  std::vector<float> logits(samples * vocab);
  if (!rank_) {
    cpu::linear(pool_, last.data(), num_sampled, lm_head, logits.data());
    return logits;
  }
  const size_t rows = static_cast<size_t>(rank_->spec.vocab_rows), ranks = static_cast<size_t>(rank_->spec.size);
  std::vector<float> slice(samples * rows);  // [num_sampled, vocab_rows]: this rank's token ids
  cpu::linear(pool_, last.data(), num_sampled, lm_head, slice.data());
  std::vector<float> gathered(ranks * samples * rows);  // [ranks, num_sampled, vocab_rows]
  rank_->communicator->all_gather(slice.data(), gathered.data(), slice.size(), CommDtype::kF32);
  for (size_t r = 0; r < ranks; ++r) {
    const size_t first = r * rows, count = std::min(rows, vocab - std::min(vocab, first));  // padding rows dropped
    for (size_t s = 0; s < samples; ++s)
      std::copy_n(&gathered[(r * samples + s) * rows], count, &logits[s * vocab + first]);
  }
  return logits;
}

std::vector<SampleResult> CpuBackend::step(const Batch& batch) {
  std::vector<float> logits = forward_logits(batch);
  if (batch.prepare_constraints) batch.prepare_constraints();
  return sample_batch_on_host(batch, logits, model_->config.vocab_size);
}

}  // namespace qinfer
