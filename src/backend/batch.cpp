#include "backend/backend.h"
#include "util/error.h"

namespace qinfer {

const char* kv_cache_dtype_name(KvCacheDtype dtype) { return dtype == KvCacheDtype::kFp8E4m3 ? "fp8_e4m3" : "bf16"; }

int64_t kv_cache_vector_bytes(KvCacheDtype dtype, int head_dim) {
  return dtype == KvCacheDtype::kFp8E4m3 ? int64_t{head_dim} + 4 : int64_t{head_dim} * 2;
}

int32_t Batch::num_sampled() const {
  int32_t n = 0;
  for (const auto& s : sequences) n += s.num_samples();
  return n;
}

void validate_batch(const Batch& batch, const ModelConfig& config, const KvCacheShape& kv, int max_model_len,
                    bool multi_position_sampling) {
  auto fail = [](const std::string& what) { throw Error(ErrorKind::kInvalidArgument, "invalid batch: " + what); };
  int64_t total = 0;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const BatchSequence& s = batch.sequences[i];
    const std::string seq = "sequence " + std::to_string(i) + ": ";
    if (s.num_tokens <= 0) fail(seq + "num_tokens must be positive");
    if (s.num_cached < 0) fail(seq + "num_cached must be non-negative");
    int64_t end = static_cast<int64_t>(s.num_cached) + s.num_tokens;
    if (end > max_model_len)
      fail(seq + std::to_string(end) + " positions exceed max_model_len " + std::to_string(max_model_len));
    int64_t blocks_needed = (end + kv.block_size - 1) / kv.block_size;
    if (static_cast<int64_t>(s.block_table.size()) < blocks_needed)
      fail(seq + "block table has " + std::to_string(s.block_table.size()) + " blocks, needs " +
           std::to_string(blocks_needed));
    for (int32_t b : s.block_table)
      if (b < 0 || b >= kv.num_blocks) fail(seq + "block id " + std::to_string(b) + " out of range");
    if (s.sample) {
      if (!s.sampling) fail(seq + "sample is set but sampling params are missing");
      if (std::optional<Error> refused = s.sampling->validate(config.vocab_size)) fail(seq + refused->what());
      if (!s.allowed_tokens.empty() && s.allowed_tokens.size() != static_cast<size_t>((config.vocab_size + 31) / 32))
        fail(seq + "allowed_tokens has " + std::to_string(s.allowed_tokens.size()) + " words, the vocabulary needs " +
             std::to_string((config.vocab_size + 31) / 32));
      if (s.sample_all_positions) {
        if (!multi_position_sampling) fail(seq + "sample_all_positions is set but the backend samples only the last");
        if (!s.allowed_tokens.empty()) fail(seq + "sample_all_positions takes no allowed_tokens");
        if (s.penalty_tokens != nullptr) fail(seq + "sample_all_positions takes no penalty_tokens");
        if (s.history.output.size() < static_cast<size_t>(s.num_tokens - 1))
          fail(seq + "sample_all_positions needs the " + std::to_string(s.num_tokens - 1) +
               " proposed tokens at the end of history.output, which holds " + std::to_string(s.history.output.size()));
      }
      for (const LogitBias& b : s.logit_bias)
        if (b.token < 0 || b.token >= config.vocab_size)
          fail(seq + "logit_bias token " + std::to_string(b.token) + " is outside the vocabulary");
    }
    total += s.num_tokens;
  }
  if (total != static_cast<int64_t>(batch.token_ids.size()))
    fail("token_ids holds " + std::to_string(batch.token_ids.size()) + " ids, sequences add up to " +
         std::to_string(total));
  for (int32_t id : batch.token_ids)
    if (id < 0 || id >= config.vocab_size)
      fail("token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(config.vocab_size));
}

std::vector<SampleResult> sample_batch_on_host(const Batch& batch, std::span<float> logits, int vocab,
                                               const std::vector<bool>& sampled_elsewhere) {
  QINFER_CHECK(sampled_elsewhere.empty() || sampled_elsewhere.size() == batch.sequences.size());
  std::vector<SampleResult> results;
  const size_t row_size = static_cast<size_t>(vocab);
  size_t row = 0;
  for (size_t index = 0; index < batch.sequences.size(); ++index) {
    const BatchSequence& s = batch.sequences[index];
    const int32_t num_samples = s.num_samples();
    if (num_samples == 0) continue;
    const bool elsewhere = !sampled_elsewhere.empty() && sampled_elsewhere[index];
    // With sample_all_positions the history ends with the proposed tokens; position i sees those before it.
    const size_t base_output = s.history.output.size() - static_cast<size_t>(num_samples - 1);
    for (int32_t i = 0; i < num_samples; ++i, ++row) {
      std::span<float> row_logits = logits.subspan(row * row_size, row_size);
      if (s.constrained()) apply_logit_constraints(row_logits, s.allowed_tokens, s.logit_bias);
      if (elsewhere) {
        results.emplace_back();
        continue;
      }
      const TokenHistory history{s.history.prompt, s.history.output.first(base_output + static_cast<size_t>(i))};
      results.push_back(sample_token(row_logits, *s.sampling, history, s.sample_step + static_cast<uint64_t>(i)));
    }
  }
  return results;
}

}  // namespace qinfer
