#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/batch_plan.h"
#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/gpu_weights.h"
#include "backend/cuda/graph_cache.h"
#include "backend/cuda/kernels/decode_attention.h"
#include "backend/cuda/kernels/device_probe.h"
#include "backend/cuda/kernels/embedding.h"
#include "backend/cuda/kernels/fused_add_rmsnorm.h"
#include "backend/cuda/kernels/gemv.h"
#include "backend/cuda/kernels/gemv_mma.h"
#include "backend/cuda/kernels/kv_dequant_gather.h"
#include "backend/cuda/kernels/prefill_attention.h"
#include "backend/cuda/kernels/qk_norm_rope_cache_write.h"
#include "backend/cuda/kernels/sampling.h"
#include "backend/cuda/kernels/swiglu.h"
#include "backend/cuda/kv_gather_plan.h"
#include "backend/cuda/upload_arena.h"
#include "backend/cuda/workspace.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer {

namespace {

using bf16 = __nv_bfloat16;

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / (1u << 30));
  return text;
}

// Measured on the H200 (docs/CUDA_NOTES.md): at one row the GEMV beats cuBLASLt, at two to four rows the tensor-core
// GEMV does (below); from five rows on cuBLASLt wins end to end.
constexpr int kGemvRowLimit = 4;
// The tensor-core GEMV wins only next to the register decode attention: between the ring attention kernels it makes
// the step a third slower (run 68; 4 sequences at 2-8 K next to the bulk-copy kernel: +29 to +37 %, runs 73-74), so it
// takes no more rows than the register kernel takes sequences, and steps whose decode attention runs a ring kernel
// (long contexts) keep it to one row (gemv_rows_next_to). The loss is run-ahead: its one-wave grids pass the launch on
// at once, so kernels two and three ahead take residency the ring kernel and cuBLASLt still need; stopping that (late
// triggers, no launch-completion edges) leaves at most 1.3 % to gain at 8 sequences (runs 104-106).
static_assert(kGemvRowLimit <= cuda::kDecodeAttentionRegisterBatch);

// The most rows a step's linears run on the GEMVs, given its decode attention (none: num_decode 0).
int gemv_rows_next_to(const cuda::DecodeAttentionParams& decode) {
  const bool register_attention =
      decode.num_decode == 0 || cuda::decode_attention_auto_kernel(decode) == cuda::DecodeAttentionKernel::kRegisters;
  return register_attention ? kGemvRowLimit : 1;
}

// Linears of 2-4 rows run on the tensor-core GEMV, which beats both the GEMV and cuBLASLt there (run 46: B=2 decode
// -12.5 %; run 68: B=4 -11 %).
bool runs_on_mma_gemv(const cuda::GemvParams& params) {
  return params.num_rows >= 2 && cuda::gemv_mma_supports(params);
}

void launch_decode_linear(const cuda::GemvParams& params, cudaStream_t stream) {
  if (runs_on_mma_gemv(params))
    cuda::launch_gemv_mma(params, cuda::gemv_mma_default_shape(params.n), stream);
  else
    cuda::launch_gemv(params, stream);
}

// Device addresses of one step's metadata (see BatchPlan).
struct DeviceBatch {
  const int32_t* token_ids;
  const int32_t* positions;
  const int64_t* slots;
  const int32_t* block_tables;
  const int32_t *decode_table_rows, *decode_q_rows, *decode_context_lens;
  const int32_t *prefill_table_rows, *prefill_q_starts, *prefill_q_lens, *prefill_cached_lens;
  // fp8 cache: the KvGatherPlan of the prefill sequences (null otherwise)
  const int32_t *gather_src_blocks, *gather_valid_tokens, *gather_tables, *gather_table_rows;
  const int32_t* sample_rows;
  const cuda::DeviceSamplingParams* sampling_params;
  const cuda::PenaltyEntry* penalties;
};

// Device addresses of one step's sampling constraints.
struct SamplingConstraints {
  const uint32_t* masks;
  const cuda::DeviceLogitBias* biases;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return name_; }
  const ModelConfig& config() const override { return model_->config; }
  KvCacheShape kv_cache() const override { return kv_shape_; }
  int max_model_len() const override { return max_model_len_; }
  std::vector<SampleResult> step(const Batch& batch) override;
  std::vector<float> forward_logits(const Batch& batch) override;

 private:
  // Validates the batch and builds its plan; throws Error(kInvalidArgument) for batches over the backend's limits.
  cuda::BatchPlan make_plan(const Batch& batch) const;
  // With an fp8 cache and prefill sequences in the plan: which cache blocks each group of them gathers into the bf16
  // scratch (kv_gather_plan.h); null otherwise. Valid until the next call.
  const cuda::KvGatherPlan* plan_gather(const cuda::BatchPlan& plan);
  // Copies the plan's metadata (and the gather plan's, if any) to the device (one transfer on the stream).
  DeviceBatch upload(const cuda::BatchPlan& plan, const cuda::KvGatherPlan* gather);
  // Enqueues the model over the plan and leaves the logits of the sampled rows in workspace_->logits. Decode attention
  // splits are planned for contexts up to `split_context`. Only enqueues work on stream_ (capturable).
  void enqueue_forward(const cuda::BatchPlan& plan, const DeviceBatch& d, int split_context,
                       const cuda::KvGatherPlan* gather);
  // Prefill attention of one layer over the fp8 cache: per gather group, its blocks dequantised into the scratch, then
  // the bf16 prefill kernel over the scratch through the group's remapped tables.
  void enqueue_fp8_prefill_attention(int layer, const cuda::PrefillAttentionParams& prefill,
                                     const cuda::KvGatherPlan& gather, const DeviceBatch& d);
  // Enqueues sampling of `rows` logits rows and the copy of their results to workspace_->host_results.
  // With `constraints` (upload_constraints()), the constrained rows' masks and biases are applied first.
  void enqueue_sampling(int rows, const DeviceBatch& d, const SamplingConstraints* constraints = nullptr);
  // Copies the plan's constraint masks and biases to the device (after the batch's prepare_constraints()).
  SamplingConstraints upload_constraints(const cuda::BatchPlan& plan);
  // y = x W^T on the GEMVs for up to gemv_rows rows (at most kGemvRowLimit), else on cuBLASLt.
  void linear(const bf16* x, int rows, const bf16* weight, int n, int k, void* y, int gemv_rows, bool y_fp32 = false);
  void warm_up_gemms();
  bool fp8() const { return kv_shape_.dtype == KvCacheDtype::kFp8E4m3; }
  // bf16 cache: layer's K or V pool. fp8 cache: its E4M3 bytes and scales.
  bf16* k_cache(int layer) const;
  bf16* v_cache(int layer) const;
  uint8_t* fp8_data(int layer, int part) const;  // part 0: K, 1: V
  float* fp8_scales(int layer, int part) const;

  std::shared_ptr<const LoadedModel> model_;
  BackendOptions options_;
  std::string name_;
  int num_sms_ = 0;
  cudaStream_t stream_ = nullptr;
  cuda::GpuWeights weights_;
  std::unique_ptr<cuda::Workspace> workspace_;
  std::unique_ptr<cuda::CublasLtGemm> gemm_;
  cuda::DeviceBuffer inv_freq_;   // [head_dim / 2] RoPE frequencies
  cuda::DeviceBuffer kv_pool_;    // [num_layers][2][num_blocks, num_kv_heads, block_size, head_dim] bf16 or E4M3
  cuda::DeviceBuffer kv_scales_;  // fp8: [num_layers][2][num_blocks, num_kv_heads, block_size] fp32
  size_t kv_layer_elements_ = 0;  // elements of one layer's K (or V) pool
  size_t kv_layer_vectors_ = 0;   // (token, KV head) vectors of one layer's K (or V) pool
  // fp8: the bf16 pool that prefill attention reads, [K|V][gather_scratch_blocks_, num_kv_heads, block_size, head_dim]
  cuda::DeviceBuffer gather_scratch_;
  int gather_scratch_blocks_ = 0;
  cuda::KvGatherPlanner gather_planner_;
  KvCacheShape kv_shape_;
  int max_model_len_ = 0;
  cuda::UploadArena arena_;
  cuda::UploadArena constraint_arena_;  // per step: allowed-token masks and logit_bias entries of constrained rows
  cuda::DecodeGraphCache graphs_;
  uint64_t graphs_arena_generation_ = 0;  // arena generation the cached graphs were captured against
  int32_t scratch_block_ = 0;             // KV block past the visible pool, written by padding rows of graphs
};

CudaBackend::CudaBackend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options)
    : model_(std::move(model)), options_(options) {
  const ModelConfig& c = model_->config;
  if (c.head_dim != 64 && c.head_dim != 128)
    throw Error(ErrorKind::kUnsupported,
                "CUDA backend: head_dim " + std::to_string(c.head_dim) + " is not supported (64 or 128)");
  if (c.hidden_size % 8 != 0 || c.intermediate_size % 8 != 0 || c.hidden_size > 8192)
    throw Error(ErrorKind::kUnsupported,
                "CUDA backend: hidden_size and intermediate_size must be multiples of 8, "
                "hidden_size at most 8192");
  if (c.num_heads % c.num_kv_heads != 0 || c.num_heads / c.num_kv_heads > 16)
    throw Error(ErrorKind::kUnsupported, "CUDA backend: GQA groups of more than 16 query heads are not supported");
  if (options.block_size <= 0 || options.block_size % 16 != 0)
    throw Error(ErrorKind::kInvalidArgument, "CUDA backend: --block-size must be a positive multiple of 16, got " +
                                                 std::to_string(options.block_size));
  if (options.max_num_seqs <= 0 || options.max_num_batched_tokens <= 0)
    throw Error(ErrorKind::kInvalidArgument, "--max-num-seqs and --max-num-batched-tokens must be positive");
  max_model_len_ = options.max_model_len > 0 ? options.max_model_len : static_cast<int>(c.max_position_embeddings);
  if (max_model_len_ > c.max_position_embeddings)
    throw Error(ErrorKind::kInvalidArgument, "--max-model-len " + std::to_string(max_model_len_) +
                                                 " exceeds the model's max_position_embeddings " +
                                                 std::to_string(c.max_position_embeddings));

  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp props{};
  CUDA_CHECK(cudaGetDeviceProperties(&props, device));
  num_sms_ = props.multiProcessorCount;
  name_ = "cuda:" + std::to_string(device) + " (" + props.name + ")";
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));

  weights_ = cuda::upload_weights(*model_, stream_);
  workspace_ = std::make_unique<cuda::Workspace>(
      c, cuda::WorkspaceLimits{options.max_num_batched_tokens, options.max_num_seqs, num_sms_});
  gemm_ = std::make_unique<cuda::CublasLtGemm>();
  const auto heuristics_start = std::chrono::steady_clock::now();
  warm_up_gemms();
  spdlog::info("{}: cuBLASLt algorithms chosen and loaded in {:.0f} ms", name_,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - heuristics_start).count());

  std::vector<float> inv_freq(static_cast<size_t>(c.head_dim / 2));
  for (size_t i = 0; i < inv_freq.size(); ++i)
    inv_freq[i] = static_cast<float>(1.0 / std::pow(c.rope_theta, 2.0 * static_cast<double>(i) / c.head_dim));
  inv_freq_ = cuda::DeviceBuffer(inv_freq.size() * 4, "RoPE table");
  CUDA_CHECK(cudaMemcpy(inv_freq_.data(), inv_freq.data(), inv_freq.size() * 4, cudaMemcpyHostToDevice));

  // fp8: the prefill scratch holds at least one sequence of max_model_len, or one full batch of new tokens; it is
  // allocated before the pool is sized so that the pool takes what is left.
  const bool fp8_cache = options.kv_cache_dtype == KvCacheDtype::kFp8E4m3;
  const int64_t blocks_needed = (max_model_len_ + options.block_size - 1) / options.block_size;
  if (fp8_cache) {
    gather_scratch_blocks_ = static_cast<int>(std::max<int64_t>(
        blocks_needed,
        (options.max_num_batched_tokens + options.block_size - 1) / options.block_size + options.max_num_seqs));
    gather_scratch_ = cuda::DeviceBuffer(static_cast<size_t>(gather_scratch_blocks_) * 2 * c.num_kv_heads *
                                             options.block_size * c.head_dim * sizeof(bf16),
                                         "fp8 KV prefill scratch");
  }

  // KV cache: what is left of the memory budget after weights, activations and the prefill scratch. A block of one
  // layer's K or V is num_kv_heads * block_size vectors of head_dim elements (bf16, or E4M3 plus an fp32 scale).
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t block_bytes = static_cast<size_t>(c.num_layers) * 2 * c.num_kv_heads * options.block_size *
                             static_cast<size_t>(kv_cache_vector_bytes(options.kv_cache_dtype, c.head_dim));
  const double used = static_cast<double>(total_bytes - free_bytes);
  const double budget = options.kv_cache_bytes > 0
                            ? static_cast<double>(options.kv_cache_bytes)
                            : options.gpu_memory_utilization * static_cast<double>(total_bytes) - used;
  const int64_t num_blocks = budget > 0 ? static_cast<int64_t>(budget / static_cast<double>(block_bytes)) - 1 : 0;
  const std::string dtype_name = kv_cache_dtype_name(options.kv_cache_dtype);
  if (num_blocks < blocks_needed || budget > static_cast<double>(free_bytes))
    throw Error(ErrorKind::kOutOfMemory,
                "KV cache (" + dtype_name + ") does not fit: one sequence of max_model_len " +
                    std::to_string(max_model_len_) + " needs " +
                    gib(static_cast<double>(blocks_needed) * static_cast<double>(block_bytes)) + ", the budget is " +
                    gib(std::max(0.0, budget)) + " (gpu_memory_utilization " +
                    std::to_string(options.gpu_memory_utilization) + " of " + gib(static_cast<double>(total_bytes)) +
                    ", in use " + gib(used) + ": weights " + gib(static_cast<double>(weights_.bytes)) +
                    ", activations " + gib(static_cast<double>(workspace_->bytes)) +
                    (fp8_cache ? ", fp8 prefill scratch " + gib(static_cast<double>(gather_scratch_.bytes())) : "") +
                    "; free " + gib(static_cast<double>(free_bytes)) +
                    "). Lower --max-model-len or raise --gpu-memory-utilization.");
  // One block more than the cache exposes: the scratch block that padding rows of decode graphs write.
  scratch_block_ = static_cast<int32_t>(num_blocks);
  kv_layer_vectors_ = static_cast<size_t>(num_blocks + 1) * c.num_kv_heads * options.block_size;
  kv_layer_elements_ = kv_layer_vectors_ * c.head_dim;
  kv_pool_ = cuda::DeviceBuffer(kv_layer_elements_ * 2 * c.num_layers * (fp8_cache ? 1 : sizeof(bf16)), "KV cache");
  if (fp8_cache) kv_scales_ = cuda::DeviceBuffer(kv_layer_vectors_ * 2 * c.num_layers * 4, "fp8 KV cache scales");
  kv_shape_ = {num_blocks, options.block_size, static_cast<int64_t>(kv_pool_.bytes() + kv_scales_.bytes()),
               options.kv_cache_dtype};
  spdlog::info("{}: weights {}, activations {}, KV cache {} {} ({} blocks of {} tokens){}", name_,
               gib(static_cast<double>(weights_.bytes)), gib(static_cast<double>(workspace_->bytes)), dtype_name,
               gib(static_cast<double>(kv_shape_.bytes)), num_blocks, options.block_size,
               fp8_cache ? ", fp8 prefill scratch " + gib(static_cast<double>(gather_scratch_.bytes())) : "");
}

CudaBackend::~CudaBackend() {
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

bf16* CudaBackend::k_cache(int layer) const { return kv_pool_.as<bf16>() + (2 * layer) * kv_layer_elements_; }
bf16* CudaBackend::v_cache(int layer) const { return kv_pool_.as<bf16>() + (2 * layer + 1) * kv_layer_elements_; }
uint8_t* CudaBackend::fp8_data(int layer, int part) const {
  return kv_pool_.as<uint8_t>() + (2 * layer + part) * kv_layer_elements_;
}
float* CudaBackend::fp8_scales(int layer, int part) const {
  return kv_scales_.as<float>() + (2 * layer + part) * kv_layer_vectors_;
}

// CUDA loads kernel modules lazily: the first launch of each cuBLASLt kernel costs milliseconds, which a request would
// otherwise pay as TTFT the first time its token count falls in a new bucket. Timing the candidates of every bucket and
// shape (tune()) on the workspace's buffers loads them all at start-up; lm_head runs one GEMM per bucket.
void CudaBackend::warm_up_gemms() {
  const ModelConfig& c = model_->config;
  const cuda::Workspace& w = *workspace_;
  const cuda::GpuLayerWeights& lw = weights_.layers.front();
  const int qkv_width = c.q_width() + 2 * c.kv_width();
  const int first_bucket = cuda::CublasLtGemm::bucket_of(kGemvRowLimit + 1);
  // Tuning times candidates on these buffers: embedding rows (model-like bf16 values) instead of the zeros of fresh
  // allocations, on which GEMMs draw less power and run faster than on real activations (docs/CUDA_NOTES.md).
  const size_t table_bytes = static_cast<size_t>(c.vocab_size) * c.hidden_size * sizeof(bf16);
  for (const cuda::DeviceBuffer* buffer : {&w.normed, &w.attention, &w.activation})
    CUDA_CHECK(cudaMemcpyAsync(buffer->data(), weights_.embed, std::min(buffer->bytes(), table_bytes),
                               cudaMemcpyDeviceToDevice, stream_));
  for (int bucket = first_bucket;; bucket *= 2) {
    const int rows = std::min(bucket, options_.max_num_batched_tokens);
    // Every bucket's algorithm is the fastest of the heuristic's first few: 3-6 % faster than the first choice on the
    // prefill shapes (docs/CUDA_NOTES.md, runs P1-P3), 3 % on the 64-sequence decode step (run K3).
    const auto warm = [&](const bf16* x, const bf16* weight, int n, int k, void* y) {
      gemm_->tune(x, weight, y, false, rows, n, k, stream_);
    };
    warm(w.normed.as<bf16>(), lw.qkv, qkv_width, c.hidden_size, w.qkv.data());
    warm(w.attention.as<bf16>(), lw.o_proj, c.hidden_size, c.q_width(), w.delta.data());
    warm(w.normed.as<bf16>(), lw.gate_up, 2 * c.intermediate_size, c.hidden_size, w.gate_up.data());
    warm(w.activation.as<bf16>(), lw.down, c.hidden_size, c.intermediate_size, w.delta.data());
    if (bucket == first_bucket || bucket / 2 < options_.max_num_seqs)
      linear(w.final_normed.as<bf16>(), std::min(bucket, options_.max_num_seqs), weights_.lm_head, c.vocab_size,
             c.hidden_size, w.logits.data(), kGemvRowLimit, true);
    if (rows == options_.max_num_batched_tokens) break;
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::linear(const bf16* x, int rows, const bf16* weight, int n, int k, void* y, int gemv_rows,
                         bool y_fp32) {
  if (rows == 0) return;
  if (rows <= gemv_rows) {
    launch_decode_linear({x, weight, y, y_fp32, rows, n, k}, stream_);
  } else {
    gemm_->matmul(x, weight, y, y_fp32, rows, n, k, stream_);
  }
}

cuda::BatchPlan CudaBackend::make_plan(const Batch& batch) const {
  validate_batch(batch, model_->config, kv_shape_, max_model_len_);
  if (static_cast<int64_t>(batch.token_ids.size()) > options_.max_num_batched_tokens ||
      static_cast<int>(batch.sequences.size()) > options_.max_num_seqs)
    throw Error(ErrorKind::kInvalidArgument, "invalid batch: " + std::to_string(batch.token_ids.size()) +
                                                 " tokens in " + std::to_string(batch.sequences.size()) +
                                                 " sequences exceed max_num_batched_tokens " +
                                                 std::to_string(options_.max_num_batched_tokens) + " / max_num_seqs " +
                                                 std::to_string(options_.max_num_seqs));
  return cuda::plan_batch(batch, kv_shape_.block_size, model_->config.vocab_size);
}

const cuda::KvGatherPlan* CudaBackend::plan_gather(const cuda::BatchPlan& plan) {
  if (!fp8() || plan.prefill_q_lens.empty()) return nullptr;
  return &gather_planner_.plan(plan, kv_shape_.block_size, gather_scratch_blocks_);
}

DeviceBatch CudaBackend::upload(const cuda::BatchPlan& plan, const cuda::KvGatherPlan* gather) {
  arena_.begin();
  const size_t h_token_ids = arena_.add(plan.token_ids), h_positions = arena_.add(plan.positions),
               h_slots = arena_.add(plan.slots), h_tables = arena_.add(plan.block_tables),
               h_dec_rows = arena_.add(plan.decode_table_rows), h_dec_q = arena_.add(plan.decode_q_rows),
               h_dec_ctx = arena_.add(plan.decode_context_lens), h_pre_rows = arena_.add(plan.prefill_table_rows),
               h_pre_start = arena_.add(plan.prefill_q_starts), h_pre_len = arena_.add(plan.prefill_q_lens),
               h_pre_cached = arena_.add(plan.prefill_cached_lens), h_sample = arena_.add(plan.sample_rows),
               h_params = arena_.add(plan.sampling_params), h_penalties = arena_.add_parts(plan.penalty_parts);
  size_t h_src_blocks = 0, h_valid_tokens = 0, h_gather_tables = 0, h_gather_rows = 0;
  if (gather != nullptr) {
    h_src_blocks = arena_.add(gather->src_blocks);
    h_valid_tokens = arena_.add(gather->valid_tokens);
    h_gather_tables = arena_.add(gather->scratch_tables);
    h_gather_rows = arena_.add(gather->scratch_table_rows);
  }
  arena_.upload(stream_);
  const auto gathered = [&](size_t handle) { return gather ? arena_.device<int32_t>(handle) : nullptr; };
  return {arena_.device<int32_t>(h_token_ids),
          arena_.device<int32_t>(h_positions),
          arena_.device<int64_t>(h_slots),
          arena_.device<int32_t>(h_tables),
          arena_.device<int32_t>(h_dec_rows),
          arena_.device<int32_t>(h_dec_q),
          arena_.device<int32_t>(h_dec_ctx),
          arena_.device<int32_t>(h_pre_rows),
          arena_.device<int32_t>(h_pre_start),
          arena_.device<int32_t>(h_pre_len),
          arena_.device<int32_t>(h_pre_cached),
          gathered(h_src_blocks),
          gathered(h_valid_tokens),
          gathered(h_gather_tables),
          gathered(h_gather_rows),
          arena_.device<int32_t>(h_sample),
          arena_.device<cuda::DeviceSamplingParams>(h_params),
          arena_.device<cuda::PenaltyEntry>(h_penalties)};
}

void CudaBackend::enqueue_forward(const cuda::BatchPlan& plan, const DeviceBatch& d, int split_context,
                                  const cuda::KvGatherPlan* gather) {
  const ModelConfig& c = model_->config;
  cuda::Workspace& w = *workspace_;
  const int tokens = plan.num_tokens, hidden = c.hidden_size, inter = c.intermediate_size;
  const int qkv_width = c.q_width() + 2 * c.kv_width();
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  cuda::launch_embedding({d.token_ids, weights_.embed, w.residual.as<float>(), tokens, hidden}, stream_);

  cuda::DecodeAttentionParams decode;
  decode.q = w.q.as<bf16>();
  decode.block_tables = d.block_tables;
  decode.table_rows = d.decode_table_rows;
  decode.q_rows = d.decode_q_rows;
  decode.context_lens = d.decode_context_lens;
  decode.out = w.attention.as<bf16>();
  decode.split_out = w.split_out.as<float>();
  decode.split_lse = w.split_lse.as<float>();
  decode.split_counters = w.split_counters.as<uint32_t>();
  decode.block_table_stride = plan.block_table_stride;
  decode.num_decode = static_cast<int>(plan.decode_q_rows.size());
  decode.num_heads = c.num_heads;
  decode.num_kv_heads = c.num_kv_heads;
  decode.head_dim = c.head_dim;
  decode.block_size = kv_shape_.block_size;
  // The pool as the Hopper kernels' tensor maps bound it: the scratch block of padded decode rows included.
  const int64_t pool_blocks = kv_shape_.num_blocks + 1;
  decode.pool_blocks = pool_blocks;
  decode.scale = scale;
  if (fp8()) decode.k_fp8 = fp8_data(0, 0);  // the planner counts the fp8 kernels' resident blocks; set per layer below
  if (decode.num_decode > 0) {
    cuda::plan_decode_attention_splits(decode, split_context, num_sms_);
    QINFER_CHECK(decode.num_decode * decode.num_splits <= w.max_split_rows);
  }
  const int gemv_rows = gemv_rows_next_to(decode);

  cuda::PrefillAttentionParams prefill;
  prefill.q = w.q.as<bf16>();
  prefill.block_tables = d.block_tables;
  prefill.table_rows = d.prefill_table_rows;
  prefill.q_starts = d.prefill_q_starts;
  prefill.q_lens = d.prefill_q_lens;
  prefill.cached_lens = d.prefill_cached_lens;
  prefill.out = w.attention.as<bf16>();
  prefill.block_table_stride = plan.block_table_stride;
  prefill.num_prefill = static_cast<int>(plan.prefill_q_lens.size());
  prefill.max_q_len = plan.max_prefill_q_len;
  prefill.num_heads = c.num_heads;
  prefill.num_kv_heads = c.num_kv_heads;
  prefill.head_dim = c.head_dim;
  prefill.block_size = kv_shape_.block_size;
  prefill.pool_blocks = pool_blocks;
  prefill.scale = scale;
  // Decode-only steps: the attention kernel does the QK-norm/RoPE/cache write itself (DecodeAttentionParams::rope),
  // one kernel fewer per layer, the same bits.
  const bool rope_in_attention = prefill.num_prefill == 0 && decode.num_decode == tokens;

  for (int l = 0; l < c.num_layers; ++l) {
    const cuda::GpuLayerWeights& lw = weights_.layers[static_cast<size_t>(l)];
    cuda::FusedAddRmsNormParams norm;
    norm.residual = w.residual.as<float>();
    norm.delta = l == 0 ? nullptr : w.delta.as<bf16>();
    norm.weight = lw.input_norm;
    norm.out = w.normed.as<bf16>();
    norm.num_rows = tokens;
    norm.hidden = hidden;
    norm.eps = eps;
    cuda::launch_fused_add_rmsnorm(norm, stream_);
    linear(w.normed.as<bf16>(), tokens, lw.qkv, qkv_width, hidden, w.qkv.data(), gemv_rows);

    cuda::QkNormRopeCacheWriteParams rope;
    rope.qkv = w.qkv.as<bf16>();
    rope.positions = d.positions;
    rope.slots = d.slots;
    rope.q_norm = lw.q_norm;
    rope.k_norm = lw.k_norm;
    rope.inv_freq = inv_freq_.as<float>();
    rope.q_out = w.q.as<bf16>();
    if (fp8()) {
      rope.k_fp8 = fp8_data(l, 0);
      rope.v_fp8 = fp8_data(l, 1);
      rope.k_scales = fp8_scales(l, 0);
      rope.v_scales = fp8_scales(l, 1);
    } else {
      rope.k_cache = k_cache(l);
      rope.v_cache = v_cache(l);
    }
    rope.num_tokens = tokens;
    rope.num_heads = c.num_heads;
    rope.num_kv_heads = c.num_kv_heads;
    rope.head_dim = c.head_dim;
    rope.block_size = kv_shape_.block_size;
    rope.eps = eps;
    if (rope_in_attention)
      decode.rope = rope;
    else
      cuda::launch_qk_norm_rope_cache_write(rope, stream_);

    if (fp8()) {
      decode.k_fp8 = fp8_data(l, 0);
      decode.v_fp8 = fp8_data(l, 1);
      decode.k_scales = fp8_scales(l, 0);
      decode.v_scales = fp8_scales(l, 1);
      cuda::launch_decode_attention(decode, stream_);
      if (gather != nullptr) enqueue_fp8_prefill_attention(l, prefill, *gather, d);
    } else {
      decode.k_cache = prefill.k_cache = k_cache(l);
      decode.v_cache = prefill.v_cache = v_cache(l);
      cuda::launch_decode_attention(decode, stream_);
      cuda::launch_prefill_attention(prefill, stream_);
    }
    linear(w.attention.as<bf16>(), tokens, lw.o_proj, hidden, c.q_width(), w.delta.data(), gemv_rows);

    norm.delta = w.delta.as<bf16>();
    norm.weight = lw.post_attn_norm;
    cuda::launch_fused_add_rmsnorm(norm, stream_);
    if (tokens <= gemv_rows) {  // SwiGLU in the GEMV's epilogue: one kernel less per layer
      cuda::GemvParams gate_up{w.normed.as<bf16>(), lw.gate_up, w.activation.data(), false, tokens, 2 * inter, hidden};
      gate_up.swiglu = true;
      launch_decode_linear(gate_up, stream_);
    } else {
      linear(w.normed.as<bf16>(), tokens, lw.gate_up, 2 * inter, hidden, w.gate_up.data(), gemv_rows);
      cuda::launch_swiglu({w.gate_up.as<bf16>(), w.activation.as<bf16>(), tokens, inter}, stream_);
    }
    linear(w.activation.as<bf16>(), tokens, lw.down, hidden, inter, w.delta.data(), gemv_rows);
  }

  const int sampled = static_cast<int>(plan.sample_rows.size());
  cuda::FusedAddRmsNormParams final_norm;
  final_norm.residual = w.residual.as<float>();
  final_norm.delta = w.delta.as<bf16>();
  final_norm.weight = weights_.final_norm;
  final_norm.out = w.final_normed.as<bf16>();
  final_norm.row_index = d.sample_rows;
  final_norm.write_residual = false;
  final_norm.num_rows = sampled;
  final_norm.hidden = hidden;
  final_norm.eps = eps;
  cuda::launch_fused_add_rmsnorm(final_norm, stream_);
  linear(w.final_normed.as<bf16>(), sampled, weights_.lm_head, c.vocab_size, hidden, w.logits.data(), gemv_rows, true);
}

void CudaBackend::enqueue_fp8_prefill_attention(int layer, const cuda::PrefillAttentionParams& prefill,
                                                const cuda::KvGatherPlan& gather, const DeviceBatch& d) {
  const ModelConfig& c = model_->config;
  const size_t scratch_elements =
      static_cast<size_t>(gather_scratch_blocks_) * c.num_kv_heads * kv_shape_.block_size * c.head_dim;
  cuda::KvDequantGatherParams copy;
  copy.k_cache = fp8_data(layer, 0);
  copy.v_cache = fp8_data(layer, 1);
  copy.k_scales = fp8_scales(layer, 0);
  copy.v_scales = fp8_scales(layer, 1);
  copy.k_out = gather_scratch_.as<bf16>();
  copy.v_out = gather_scratch_.as<bf16>() + scratch_elements;
  copy.num_kv_heads = c.num_kv_heads;
  copy.block_size = kv_shape_.block_size;
  copy.head_dim = c.head_dim;
  cuda::PrefillAttentionParams group_attention = prefill;
  group_attention.k_cache = copy.k_out;
  group_attention.v_cache = copy.v_out;
  group_attention.block_tables = d.gather_tables;
  group_attention.block_table_stride = gather.table_stride;
  group_attention.pool_blocks = gather_scratch_blocks_;
  for (const cuda::KvGatherGroup& group : gather.groups) {
    copy.src_blocks = d.gather_src_blocks + group.block_begin;
    copy.valid_tokens = d.gather_valid_tokens + group.block_begin;
    copy.num_blocks = group.num_blocks;
    cuda::launch_kv_dequant_gather(copy, stream_);
    group_attention.table_rows = d.gather_table_rows + group.first;
    group_attention.q_starts = d.prefill_q_starts + group.first;
    group_attention.q_lens = d.prefill_q_lens + group.first;
    group_attention.cached_lens = d.prefill_cached_lens + group.first;
    group_attention.num_prefill = group.last - group.first;
    cuda::launch_prefill_attention(group_attention, stream_);
  }
}

SamplingConstraints CudaBackend::upload_constraints(const cuda::BatchPlan& plan) {
  std::vector<std::span<const std::byte>> masks, biases;
  for (std::span<const uint32_t> mask : plan.masks) masks.push_back(std::as_bytes(mask));
  for (std::span<const LogitBias> bias : plan.biases) biases.push_back(std::as_bytes(bias));
  constraint_arena_.begin();
  const size_t h_masks = constraint_arena_.add_parts(masks), h_biases = constraint_arena_.add_parts(biases);
  constraint_arena_.upload(stream_);
  return {constraint_arena_.device<uint32_t>(h_masks), constraint_arena_.device<cuda::DeviceLogitBias>(h_biases)};
}

void CudaBackend::enqueue_sampling(int rows, const DeviceBatch& d, const SamplingConstraints* constraints) {
  cuda::Workspace& w = *workspace_;
  cuda::SamplingKernelParams sampling;
  sampling.logits = w.logits.as<float>();
  sampling.work = w.sample_work.as<float>();
  sampling.probs = w.sample_probs.as<float>();
  sampling.chunk_stats = w.sample_stats.as<cuda::LogitsChunkStats>();
  sampling.params = d.sampling_params;
  sampling.penalties = d.penalties;
  sampling.results = w.results.as<cuda::SampledToken>();
  sampling.num_rows = rows;
  sampling.vocab = model_->config.vocab_size;
  if (constraints != nullptr) {
    sampling.constrained = true;
    sampling.masks = constraints->masks;
    sampling.biases = constraints->biases;
  }
  cuda::launch_sampling(sampling, stream_);
  if (rows > 0)
    CUDA_CHECK(cudaMemcpyAsync(w.host_results.data(), w.results.data(), rows * sizeof(cuda::SampledToken),
                               cudaMemcpyDeviceToHost, stream_));
}

// Decode batches are padded to these sizes so that few graphs serve all batch sizes.
int padded_batch_size(int sequences) {
  return sequences <= 8 ? static_cast<int>(std::bit_ceil(static_cast<unsigned>(sequences))) : (sequences + 7) / 8 * 8;
}

std::vector<SampleResult> CudaBackend::step(const Batch& batch) {
  cuda::BatchPlan plan = make_plan(batch);
  const int sampled = static_cast<int>(plan.sample_rows.size());
  std::vector<int> top_logprobs(static_cast<size_t>(sampled));
  for (int i = 0; i < sampled; ++i)
    top_logprobs[static_cast<size_t>(i)] = plan.sampling_params[static_cast<size_t>(i)].num_top_logprobs;

  // Decode-only steps replay a captured graph: padded batch, block tables and attention splits planned for the
  // power-of-two bucket of the longest context, so one graph serves many steps.
  cuda::DecodeGraphKey key;
  bool use_graph = options_.cuda_graphs && cuda::is_graphable_decode(plan);
  if (use_graph) {
    key.padded_sequences = padded_batch_size(sampled);
    key.context_bucket = static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(64, plan.max_decode_context))));
    key.block_table_stride = (key.context_bucket + kv_shape_.block_size - 1) / kv_shape_.block_size;
    use_graph =
        key.padded_sequences <= options_.max_num_seqs && key.padded_sequences <= options_.max_num_batched_tokens;
  }
  if (use_graph)
    cuda::pad_decode_plan(plan, key.padded_sequences, key.block_table_stride, scratch_block_, kv_shape_.block_size);
  const cuda::KvGatherPlan* gather = plan_gather(plan);
  const DeviceBatch d = upload(plan, gather);
  const int rows = static_cast<int>(plan.sample_rows.size());
  // Constrained steps sample after the forward (graph) is enqueued and the caller's masks are ready, so that the
  // masks are computed while the GPU runs the forward.
  const bool constrained = plan.constrained();
  key.samples = !constrained;
  auto enqueue = [&] {
    enqueue_forward(plan, d, use_graph ? key.context_bucket : plan.max_decode_context, gather);
    if (!constrained) enqueue_sampling(rows, d);
  };
  if (use_graph) {
    if (arena_.generation() != graphs_arena_generation_) {
      graphs_.clear();
      graphs_arena_generation_ = arena_.generation();
    }
    graphs_.launch(key, enqueue, stream_);
  } else {
    enqueue();
  }
  if (constrained) {
    if (batch.prepare_constraints) batch.prepare_constraints();
    const SamplingConstraints constraints = upload_constraints(plan);
    enqueue_sampling(rows, d, &constraints);
  } else if (batch.prepare_constraints) {
    batch.prepare_constraints();
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));

  std::vector<SampleResult> results(static_cast<size_t>(sampled));
  const auto* device_results = workspace_->host_results.as<cuda::SampledToken>();
  for (int i = 0; i < sampled; ++i) {
    const cuda::SampledToken& r = device_results[i];
    SampleResult& out = results[static_cast<size_t>(i)];
    out.token = r.token;
    out.logprob = r.logprob;
    for (int n = 0; n < top_logprobs[static_cast<size_t>(i)]; ++n)
      out.top.push_back({r.top_tokens[n], r.top_logprobs[n]});
  }
  return results;
}

std::vector<float> CudaBackend::forward_logits(const Batch& batch) {
  const cuda::BatchPlan plan = make_plan(batch);
  const cuda::KvGatherPlan* gather = plan_gather(plan);
  const DeviceBatch d = upload(plan, gather);
  enqueue_forward(plan, d, plan.max_decode_context, gather);
  std::vector<float> logits(plan.sample_rows.size() * static_cast<size_t>(model_->config.vocab_size));
  CUDA_CHECK(
      cudaMemcpyAsync(logits.data(), workspace_->logits.data(), logits.size() * 4, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return logits;
}

}  // namespace

std::string cuda_unavailable_reason() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("CUDA is not usable: ") + cudaGetErrorString(status);
  }
  if (count == 0) return "no CUDA device found";
  cudaDeviceProp props{};
  status = cudaGetDeviceProperties(&props, 0);
  if (status != cudaSuccess) return std::string("cannot query GPU 0: ") + cudaGetErrorString(status);
  if (props.major < 8)
    return std::string("GPU 0 (") + props.name + ") has compute capability " + std::to_string(props.major) + "." +
           std::to_string(props.minor) + "; qinfer needs 8.0 or newer (bf16 tensor cores)";
  status = cuda::probe_kernel_image();
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("this qinfer build has no kernels for GPU 0 (") + props.name + ", compute capability " +
           std::to_string(props.major) + "." + std::to_string(props.minor) + "): " + cudaGetErrorString(status);
  }
  return {};
}

int64_t cuda_memory_in_use_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<int64_t>(total_bytes - free_bytes);
}

std::unique_ptr<Backend> create_cuda_backend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options) {
  std::string reason = cuda_unavailable_reason();
  if (!reason.empty()) throw Error(ErrorKind::kUnavailable, "CUDA backend: " + reason);
  return std::make_unique<CudaBackend>(std::move(model), options);
}

}  // namespace qinfer
