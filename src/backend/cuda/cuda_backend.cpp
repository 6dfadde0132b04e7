#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/attention.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_capabilities.h"
#include "backend/cuda/gpu_weights.h"
#include "backend/cuda/graph_cache.h"
#include "backend/cuda/kernels/sampling.h"
#include "backend/cuda/kv_pool.h"
#include "backend/cuda/linear_layer.h"
#include "backend/cuda/qwen3_forward.h"
#include "backend/cuda/step_plan.h"
#include "backend/cuda/tensor_parallel_rank.h"
#include "backend/cuda/workspace.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer {

namespace {

using bf16 = __nv_bfloat16;

// Checks what the kernels need of the model and the options; throws Error naming the field.
void check_supported(const ModelConfig& c, const BackendOptions& options) {
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
}

int resolve_max_model_len(const ModelConfig& c, const BackendOptions& options) {
  const int max_model_len =
      options.max_model_len > 0 ? options.max_model_len : static_cast<int>(c.max_position_embeddings);
  if (max_model_len > c.max_position_embeddings)
    throw Error(ErrorKind::kInvalidArgument, "--max-model-len " + std::to_string(max_model_len) +
                                                 " exceeds the model's max_position_embeddings " +
                                                 std::to_string(c.max_position_embeddings));
  return max_model_len;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Device addresses of one step's sampling constraints.
struct SamplingConstraints {
  const uint32_t* masks;
  const cuda::DeviceLogitBias* biases;
};

// The backend owns every device resource and runs steps on one stream: plan (host) -> upload -> forward (or a
// captured graph of it) -> sampling -> results back.
class CudaBackend final : public Backend {
 public:
  // With `rank`, one rank of a tensor-parallel group (create_cuda_rank_backend).
  CudaBackend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options,
              std::optional<cuda::CudaTensorParallelRank> rank = std::nullopt);
  ~CudaBackend() override;

  std::string name() const override { return name_; }
  const ModelConfig& config() const override { return model_->config; }
  KvCacheShape kv_cache() const override { return kv_->shape(); }
  int max_model_len() const override { return max_model_len_; }
  MemoryPlan memory_plan() const override { return memory_plan_; }
  bool supports_multi_position_sampling() const override { return true; }
  std::vector<SampleResult> step(const Batch& batch) override;
  std::vector<float> forward_logits(const Batch& batch) override;

 private:
  cuda::KernelStream kernel_stream() const { return {stream_, device_}; }
  // The lm_head and layer shapes whose cuBLASLt algorithms are chosen at start-up, on the workspace's buffers filled
  // with embedding rows (model-like bf16 values: on the zeros of fresh allocations GEMMs draw less power and run
  // faster than on real activations, docs/CUDA_DESIGN.md "cuBLASLt").
  // Chooses and loads the cuBLASLt algorithms (LinearLayers::warm_up) through the tuning cache of
  // options_.gemm_tuning_cache_dir, and says in one line what it did.
  void warm_up_gemms();
  // Enqueues sampling of the step's sampled rows [first, first + count), whose logits workspace_->logits holds, and
  // the copy of their results to workspace_->host_results at the same rows. With `constraints`
  // (upload_constraints()), the constrained rows' masks and biases are applied first.
  void enqueue_sampling(const cuda::StepPlan& step, int first, int count, const cuda::KernelStream& stream,
                        const SamplingConstraints* constraints = nullptr);
  // Copies the step's constraint masks and biases to the device (after the batch's prepare_constraints()).
  SamplingConstraints upload_constraints(const cuda::BatchPlan& plan);

  std::shared_ptr<const LoadedModel> model_;
  BackendOptions options_;
  int max_model_len_ = 0;
  cuda::DeviceCapabilities device_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cuda::GpuWeights weights_;
  std::unique_ptr<cuda::Workspace> workspace_;
  std::unique_ptr<cuda::RankCollectives> rank_;  // a tensor-parallel rank's collectives; null on one GPU
  bool samples_ = true;                          // false for tensor-parallel ranks other than 0
  cuda::LinearLayers linears_;
  std::unique_ptr<cuda::Attention> attention_;
  std::unique_ptr<cuda::KvPool> kv_;
  std::unique_ptr<cuda::StepPlanner> planner_;
  std::unique_ptr<cuda::Qwen3Forward> forward_;
  cuda::DecodeGraphCache graphs_;
  uint64_t graphs_upload_generation_ = 0;  // upload generation the cached graphs were captured against
  MemoryPlan memory_plan_;                 // graphs: not tracked (their pools are the driver's)
  cuda::UploadArena constraint_arena_;     // per step: allowed-token masks and logit_bias entries of constrained rows
};

CudaBackend::CudaBackend(std::shared_ptr<const LoadedModel> model, const BackendOptions& options,
                         std::optional<cuda::CudaTensorParallelRank> rank)
    : model_(std::move(model)), options_(options) {
  const ModelConfig& c = model_->config;
  check_supported(c, options);
  max_model_len_ = resolve_max_model_len(c, options);
  device_ = cuda::query_device_capabilities();
  name_ = "cuda:" + std::to_string(device_.device) + " (" + device_.name + ")";
  if (rank) name_ += " rank " + std::to_string(rank->spec.rank) + "/" + std::to_string(rank->spec.size);
  spdlog::info("{}: {}", name_, device_.summary());
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));

  weights_ = cuda::upload_weights(*model_, stream_);
  workspace_ = std::make_unique<cuda::Workspace>(
      c, cuda::WorkspaceLimits{options.max_num_batched_tokens, options.max_num_seqs, device_.num_sms});
  if (rank) {
    rank_ =
        std::make_unique<cuda::RankCollectives>(*rank, c, options.max_num_batched_tokens, workspace_->max_logit_rows);
    samples_ = rank->spec.rank == 0;
  }
  const cuda::LinearLayers::QuantizedScratchBytes quantized_scratch =
      linears_.reserve_quantized_scratch(weights_.quantized_shapes);
  warm_up_gemms();

  attention_ = std::make_unique<cuda::Attention>(
      c, options.kv_cache_dtype, options.block_size,
      cuda::AttentionLimits{max_model_len_, options.max_num_batched_tokens, options.max_num_seqs});
  const cuda::StepLimits step_limits{options.max_num_seqs, options.max_num_batched_tokens, max_model_len_};
  cuda::DeviceBuffer block_tables(static_cast<size_t>(cuda::block_table_bytes(step_limits, options.block_size)),
                                  "block tables");
  std::vector<cuda::MemoryPart> allocated = {
      {"weights", weights_.bytes}, {"activations", workspace_->bytes}, {"block tables", block_tables.bytes()}};
  if (rank_) allocated.push_back({"tensor-parallel buffers", rank_->bytes()});
  if (attention_->gather_scratch_blocks() > 0)
    allocated.push_back({"fp8 prefill scratch", attention_->scratch_bytes()});
  if (quantized_scratch.dequantized > 0)
    allocated.push_back({"dequantized weight scratch", quantized_scratch.dequantized});
  if (quantized_scratch.gemm_partials > 0)
    allocated.push_back({"quantized GEMM partial sums", quantized_scratch.gemm_partials});
  kv_ = std::make_unique<cuda::KvPool>(
      c,
      cuda::KvPoolOptions{options.kv_cache_dtype, options.block_size, max_model_len_, options.gpu_memory_utilization,
                          options.kv_cache_bytes, options.draft_kv_bytes_per_block, options.draft_reserved_bytes,
                          options.kv_cache_num_blocks},
      allocated);
  planner_ = std::make_unique<cuda::StepPlanner>(
      c, kv_->shape(), kv_->scratch_block(), attention_->gather_scratch_blocks(), step_limits, std::move(block_tables));
  forward_ = std::make_unique<cuda::Qwen3Forward>(c, weights_, *workspace_, linears_, *attention_, *kv_, rank_.get());
  const KvCacheShape kv = kv_->shape();
  memory_plan_.device_total = kv_->device_total_bytes();
  memory_plan_.budget = kv_->budget_bytes();
  memory_plan_.weights = static_cast<int64_t>(weights_.bytes);
  memory_plan_.activations = static_cast<int64_t>(workspace_->bytes + attention_->scratch_bytes() +
                                                  quantized_scratch.dequantized + quantized_scratch.gemm_partials +
                                                  (rank_ ? rank_->bytes() : 0)) +
                             cuda::block_table_bytes(step_limits, options.block_size);
  memory_plan_.kv = kv;
  std::string parts;
  for (const cuda::MemoryPart& part : allocated)
    parts += part.name + " " + cuda::format_gib(static_cast<double>(part.bytes)) + ", ";
  spdlog::info("{}: {}KV cache {} {} ({} blocks of {} tokens)", name_, parts, kv_cache_dtype_name(kv.dtype),
               cuda::format_gib(static_cast<double>(kv.bytes)), kv.num_blocks, kv.block_size);
}

CudaBackend::~CudaBackend() {
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

void CudaBackend::warm_up_gemms() {
  const auto start = std::chrono::steady_clock::now();
  cuda::GemmTuningEnvironment environment{.gpu_name = device_.name,
                                          .compute_capability = device_.compute_major * 10 + device_.compute_minor,
                                          .cublaslt_version = cublasLtGetVersion(),
                                          .workspace_bytes = cuda::CublasLtGemm::workspace_bytes()};
  CUDA_CHECK(cudaDriverGetVersion(&environment.driver_version));
  cuda::GemmTuningCache cache(options_.gemm_tuning_cache_dir, std::move(environment));
  const ModelConfig& c = model_->config;
  const cuda::Workspace& w = *workspace_;
  const cuda::GpuLayerWeights& lw = weights_.layers.front();
  const size_t table_bytes = static_cast<size_t>(weights_.vocab_rows) * c.hidden_size * sizeof(bf16);
  for (const cuda::DeviceBuffer* buffer : {&w.normed, &w.attention, &w.activation})
    CUDA_CHECK(cudaMemcpyAsync(buffer->data(), weights_.embed, std::min(buffer->bytes(), table_bytes),
                               cudaMemcpyDeviceToDevice, stream_));
  // A tensor-parallel rank's o_proj and down write fp32 partial sums (qwen3_forward.h).
  void* delta = rank_ ? static_cast<void*>(rank_->partial_delta()) : w.delta.data();
  const bool delta_f32 = rank_ != nullptr;
  const cuda::LinearLayers::WarmUpCounts counts =
      linears_.warm_up({{&lw.qkv, w.normed.as<bf16>(), w.qkv.data()},
                        {&lw.o_proj, w.attention.as<bf16>(), delta, delta_f32},
                        {&lw.gate_up, w.normed.as<bf16>(), w.gate_up.data()},
                        {&lw.down, w.activation.as<bf16>(), delta, delta_f32},
                        {&weights_.lm_head, w.final_normed.as<bf16>(), w.logits.data(), true, false}},
                       options_.max_num_batched_tokens, options_.max_num_seqs, kernel_stream(), &cache);
  cache.save();
  const double ms = 1e3 * seconds_since(start);
  if (!cache.enabled())
    spdlog::info("{}: cuBLASLt algorithms of {} shapes timed and loaded in {:.0f} ms (no tuning cache)", name_,
                 counts.tuned, ms);
  else if (counts.tuned == 0)
    spdlog::info("{}: cuBLASLt algorithms of {} shapes taken from the tuning cache {} and loaded in {:.0f} ms", name_,
                 counts.from_cache, cache.path().string(), ms);
  else
    spdlog::info(
        "{}: cuBLASLt algorithms of {} shapes timed ({} from the tuning cache) and loaded in {:.0f} ms; "
        "saved to {}",
        name_, counts.tuned, counts.from_cache, ms, cache.path().string());
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

void CudaBackend::enqueue_sampling(const cuda::StepPlan& step, int first, int count, const cuda::KernelStream& stream,
                                   const SamplingConstraints* constraints) {
  cuda::Workspace& w = *workspace_;
  cuda::SamplingKernelParams sampling;
  sampling.logits = w.logits.as<float>();
  sampling.work = w.sample_work.as<float>();
  sampling.probs = w.sample_probs.as<float>();
  sampling.chunk_stats = w.sample_stats.as<cuda::LogitsChunkStats>();
  sampling.params = step.device.sampling_params + first;
  sampling.penalties = step.device.penalties;  // rows index their entries absolutely, as masks and biases
  sampling.results = w.results.as<cuda::SampledToken>() + first;
  sampling.num_rows = count;
  sampling.vocab = model_->config.vocab_size;
  if (constraints != nullptr) {
    sampling.constrained = true;
    sampling.masks = constraints->masks;
    sampling.biases = constraints->biases;
  }
  cuda::launch_sampling(sampling, stream);
  if (count > 0)
    CUDA_CHECK(cudaMemcpyAsync(w.host_results.as<cuda::SampledToken>() + first, sampling.results,
                               count * sizeof(cuda::SampledToken), cudaMemcpyDeviceToHost, stream_));
}

std::vector<SampleResult> CudaBackend::step(const Batch& batch) {
  const cuda::StepPlan& step = planner_->plan(batch, options_.cuda_graphs, stream_);
  // Constrained steps sample after the forward (or its graph, captured without sampling) is enqueued and the caller's
  // masks are ready, so that the masks are computed while the GPU runs the forward.
  // Rows past the logits buffer's max_logit_rows (several positions of sequences sampled) are computed and sampled
  // in further chunks after the first; a graph's decode step never has them.
  const bool constrained = step.host.constrained();
  const int rows = static_cast<int>(step.host.sample_rows.size());
  const int chunk_rows = workspace_->max_logit_rows;
  const auto enqueue = [&](cuda::GraphNodeRoles* roles) {
    const cuda::KernelStream stream{stream_, device_, roles};
    forward_->enqueue(step, stream);
    if (!constrained && samples_) enqueue_sampling(step, 0, std::min(rows, chunk_rows), stream);
  };
  if (step.graph) {
    if (planner_->upload_generation() != graphs_upload_generation_) {
      graphs_.clear();
      graphs_upload_generation_ = planner_->upload_generation();
    }
    graphs_.launch(
        step.graph_key, [&](cuda::GraphNodeRoles& roles) { enqueue(&roles); }, stream_);
  } else {
    enqueue(nullptr);
  }
  // Of a tensor-parallel group only rank 0 samples (every rank has the gathered logits); the others run the forward
  // and the later chunks' lm_head with their collectives.
  if (batch.prepare_constraints && samples_) batch.prepare_constraints();
  std::optional<SamplingConstraints> constraints;
  if (constrained && samples_) {
    constraints = upload_constraints(step.host);
    enqueue_sampling(step, 0, std::min(rows, chunk_rows), kernel_stream(), &*constraints);
  }
  for (int first = chunk_rows; first < rows; first += chunk_rows) {
    const int count = std::min(chunk_rows, rows - first);
    forward_->enqueue_logits(step, first, count, kernel_stream());
    if (samples_) enqueue_sampling(step, first, count, kernel_stream(), constraints ? &*constraints : nullptr);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (!samples_) return {};

  std::vector<SampleResult> results(static_cast<size_t>(step.num_requested_samples));
  const auto* device_results = workspace_->host_results.as<cuda::SampledToken>();
  for (size_t i = 0; i < results.size(); ++i) {
    const cuda::SampledToken& r = device_results[i];
    SampleResult& out = results[i];
    out.token = r.token;
    out.logprob = r.logprob;
    for (int n = 0; n < step.host.sampling_params[i].num_top_logprobs; ++n)
      out.top.push_back({r.top_tokens[n], r.top_logprobs[n]});
  }
  return results;
}

std::vector<float> CudaBackend::forward_logits(const Batch& batch) {
  const cuda::StepPlan& step = planner_->plan(batch, false, stream_);
  forward_->enqueue(step, kernel_stream());
  const int rows = static_cast<int>(step.host.sample_rows.size());
  const int chunk_rows = workspace_->max_logit_rows;
  const size_t vocab = static_cast<size_t>(model_->config.vocab_size);
  std::vector<float> logits(static_cast<size_t>(rows) * vocab);  // [rows, vocab]
  for (int first = 0; first < rows; first += chunk_rows) {
    const int count = std::min(chunk_rows, rows - first);
    if (first > 0) forward_->enqueue_logits(step, first, count, kernel_stream());
    CUDA_CHECK(cudaMemcpyAsync(logits.data() + static_cast<size_t>(first) * vocab, workspace_->logits.data(),
                               static_cast<size_t>(count) * vocab * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  }
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return logits;
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

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

std::unique_ptr<Backend> create_cuda_rank_backend(std::shared_ptr<const LoadedModel> shard,
                                                  const BackendOptions& options,
                                                  const cuda::CudaTensorParallelRank& rank) {
  return std::make_unique<CudaBackend>(std::move(shard), options, rank);
}

}  // namespace qinfer
