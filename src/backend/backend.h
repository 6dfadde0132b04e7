// The forward pass behind one interface. A backend runs a batch of sequences over its paged KV cache and returns
// one sampled token for every sequence that asks for one. It knows nothing about requests, scheduling or text.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/kv_cache_dtype.h"
#include "backend/sampling.h"
#include "model/qwen3_weights.h"

namespace qinfer {

// "bf16" | "fp8_e4m3": the name reports and logs use.
const char* kv_cache_dtype_name(KvCacheDtype dtype);

// Bytes one (token, KV head) K or V vector of head_dim elements takes in a KV cache of `dtype` stored as named (the
// GPU's): 2 per element for bf16, 1 per element plus a 4-byte fp32 scale for fp8.
int64_t kv_cache_vector_bytes(KvCacheDtype dtype, int head_dim);

struct BackendOptions {
  std::string device = "auto";          // auto | cpu | cuda
  int block_size = 16;                  // tokens per KV block
  int max_model_len = 0;                // 0: the model's max_position_embeddings
  int max_num_seqs = 256;               // sequences in one batch, at most
  int max_num_batched_tokens = 8192;    // tokens in one batch, at most
  double gpu_memory_utilization = 0.9;  // fraction of device memory for weights + activations + KV cache
  int64_t kv_cache_bytes = 0;  // --kv-cache-memory-bytes: KV pool size. 0: CPU 2 GiB (capped by what max_num_seqs
                               // sequences can use); CUDA what gpu_memory_utilization leaves
  int num_threads = 0;         // CPU worker threads (0: all cores)
  bool cuda_graphs = true;
  // CUDA: directory of the file of tuned cuBLASLt choices (--gemm-tuning-cache), read at start and written after
  // tuning; empty: time them at every start.
  std::string gemm_tuning_cache_dir;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kBf16;  // --kv-cache-dtype
  int tensor_parallel_size = 1;  // --tensor-parallel-size: ranks the model is split over (docs/TENSOR_PARALLEL.md)
  // --tensor-parallel-same-device (CUDA, tests and diagnostics): every rank on GPU 0, through the same-device
  // communicator instead of NCCL, without CUDA graphs. Slower than one rank; it checks the split where one GPU exists.
  bool tensor_parallel_same_device = false;
  // A draft model beside this backend on the same device whose KV pools are indexed by this backend's block ids:
  // each block this backend's budget sizes also pays for the draft's KV of the same block
  // (draft_kv_bytes_per_block), and the draft's weights and activations (draft_reserved_bytes) come off the
  // utilisation budget first. 0: no draft.
  int64_t draft_kv_bytes_per_block = 0;
  int64_t draft_reserved_bytes = 0;
  // > 0: exactly this many KV blocks whatever the budget (the draft's backend takes its target's count); refused
  // with kOutOfMemory when they do not fit.
  int64_t kv_cache_num_blocks = 0;
};

// One sequence's share of a batch. Its tokens occupy positions [num_cached, num_cached + num_tokens).
struct BatchSequence {
  static constexpr int32_t kNoSlot = -1;
  int32_t num_tokens = 0;                // 1 for decode; a prompt chunk for prefill
  int32_t num_cached = 0;                // tokens of this sequence already in the KV cache
  std::span<const int32_t> block_table;  // KV block ids covering num_cached + num_tokens positions, in order
  // Which of the caller's running sequences this is, so that a backend may keep the block table where it computes
  // (the CUDA backend: on the device) and receive only what changed. `slot` is in [0, max_num_seqs) and unique in a
  // batch; kNoSlot (a caller without stable sequences: tests, benchmarks, one-shot generation) has the whole table
  // sent with every step. Within one `table_generation` of a slot, the entries covering positions [0, num_cached)
  // are those the backend was given when it computed those positions; entries past them may change between batches
  // (blocks of rejected speculative tokens released and others taken). A table built anew — admission, resumption
  // after preemption, mapped prefix-cache or fork blocks, another sequence taking the slot — comes with a generation
  // the slot never had. The engine fills both for every sequence; the CUDA backend refuses a slot outside
  // [kNoSlot, max_num_seqs) or one given twice in a batch; the CPU backend ignores them.
  int32_t slot = kNoSlot;
  uint64_t table_generation = 0;
  bool sample = false;  // sample a token after the last position (false for non-final prefill chunks)
  const SamplingParams* sampling = nullptr;       // required when sample
  TokenHistory history;                           // for penalties; output excludes the token being produced
  const PenaltyTokens* penalty_tokens = nullptr;  // the same history as a penalty list kept by the caller, if it
                                                  // keeps one: read in O(distinct tokens) instead of walking history
  uint64_t sample_step = 0;  // index of the token being generated, selects the seeded random number
  // Constrained decoding (apply_logit_constraints): the allowed tokens, (vocab + 31) / 32 words, empty for all; its
  // contents are final once the batch's prepare_constraints() has returned. And OpenAI logit_bias entries.
  std::span<const uint32_t> allowed_tokens;
  std::span<const LogitBias> logit_bias;
  bool constrained() const { return !allowed_tokens.empty() || !logit_bias.empty(); }
  // Speculative verification, only for a backend whose supports_multi_position_sampling() is true: with `sample`,
  // sample after every one of the num_tokens positions instead of the last only, one result per position in order.
  // Position i (0-based) is sampled with sample_step + i and its penalties see the first
  // history.output.size() - (num_tokens - 1) + i output tokens: the caller ends history.output with the proposed
  // tokens (token_ids after the first), so each position sees exactly the output it follows. logit_bias applies at
  // every position; allowed_tokens must be empty and penalty_tokens null (neither covers the proposed tokens).
  bool sample_all_positions = false;
  int32_t num_samples() const { return !sample ? 0 : sample_all_positions ? num_tokens : 1; }
};

struct Batch {
  std::vector<int32_t> token_ids;        // [sum of num_tokens], sequences concatenated in order
  std::vector<BatchSequence> sequences;  // spans inside must stay valid for the call
  // When set, fills the sequences' allowed_tokens. step() calls it once, after the forward has started and before
  // sampling, so that the caller computes the masks while the device runs the step.
  std::function<void()> prepare_constraints;
  int32_t num_sampled() const;  // results step() returns: the sum of the sequences' num_samples()
};

struct KvCacheShape {
  int64_t num_blocks = 0;
  int block_size = 0;
  int64_t bytes = 0;
  KvCacheDtype dtype = KvCacheDtype::kBf16;
};

// Where a backend's memory goes, for the start-up summary: bytes per part, nullopt for a part the backend does not
// report (the CPU backend has no device total and no graphs).
struct MemoryPlan {
  std::optional<int64_t> device_total;  // memory of the device (the GPU's)
  std::optional<int64_t> budget;        // what the backend may use of it (--gpu-memory-utilization)
  std::optional<int64_t> weights;       // the model's weights as the backend holds them
  std::optional<int64_t> activations;   // buffers of the largest step (--max-num-batched-tokens, --max-num-seqs)
  std::optional<int64_t> graphs;        // captured CUDA graphs and their memory pools
  KvCacheShape kv;                      // the KV pool: blocks of block_size tokens, bytes
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;  // "cpu", "cuda:0 (NVIDIA H200)"
  virtual const ModelConfig& config() const = 0;
  virtual KvCacheShape kv_cache() const = 0;
  virtual int max_model_len() const = 0;
  // The parts a backend does not override stay unreported.
  virtual MemoryPlan memory_plan() const {
    MemoryPlan plan;
    plan.kv = kv_cache();
    return plan;
  }

  // Whether step() and forward_logits() take sequences with sample_all_positions (speculative verification). A
  // backend without it refuses such batches; the engine then runs without speculation.
  virtual bool supports_multi_position_sampling() const { return false; }

  // Empty while the backend can run steps; once it cannot (a tensor-parallel rank failed), why. Such a backend
  // refuses every later step; the server's /health then answers 503. Safe to call from any thread.
  virtual std::string failure() const { return {}; }

  // Runs the batch: writes K/V of every token into the blocks given, and returns one result per sequence with
  // `sample` set (one per position with sample_all_positions), in batch order. Blocks of different sequences may be
  // shared only for fully cached prefix blocks, which are read, never written. Throws Error(kInvalidArgument) for a
  // malformed batch.
  virtual std::vector<SampleResult> step(const Batch& batch) = 0;

  // For tests: the raw logits [num_sampled, vocab] after the last position of each sampling sequence (after every
  // position with sample_all_positions), without sampling. Writes the KV cache exactly as step() does.
  virtual std::vector<float> forward_logits(const Batch& batch) = 0;
};

// Checks the structure of a batch against the cache and model (token ids in the vocabulary, block tables long enough,
// block ids in range, spans consistent). Shared by all backends; sample_all_positions is refused unless
// `multi_position_sampling` says the backend supports it. Throws Error(kInvalidArgument).
void validate_batch(const Batch& batch, const ModelConfig& config, const KvCacheShape& kv, int max_model_len,
                    bool multi_position_sampling = false);

// Samples the batch's sampled rows on the host from their logits [num_sampled, vocab] (forward_logits' rows), as
// sample_token() defines: a constrained row gets its constraints applied in place first; position i of a
// sample_all_positions sequence draws with sample_step + i over the output before its proposal. The CPU backend's
// sampling, and the reference other backends' draws are checked against. Results in batch order.
// `sampled_elsewhere` [batch.sequences.size()] (empty: none): sequences whose rows get their constraints applied but
// are left unsampled (default results in their places), for a caller that draws them by another rule.
std::vector<SampleResult> sample_batch_on_host(const Batch& batch, std::span<float> logits, int vocab,
                                               const std::vector<bool>& sampled_elsewhere = {});

}  // namespace qinfer
