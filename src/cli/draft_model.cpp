#include "cli/draft_model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "backend/factory.h"
#include "model/test_model.h"
#include "util/byte_size.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer::cli {
namespace {

namespace fs = std::filesystem;

// The draft's activations and graphs on a GPU, not known before its backend exists: an allowance that covers the
// 0.6B and 1.7B at the default batch limits.
constexpr int64_t kDraftActivationAllowance = int64_t{1} << 30;

ModelFlags draft_model_flags(const SpeculativeConfig& spec, const ModelFlags& target) {
  ModelFlags flags;
  flags.model = spec.draft_model;
  flags.load_format = target.load_format;
  flags.seed = target.seed;
  flags.hub = target.hub;
  if (target.load_format != "dummy") return flags;
  if (!spec.draft_config.empty())
    flags.config = spec.draft_config;
  else if (fs::is_directory(spec.draft_model))
    flags.config = (fs::path(spec.draft_model) / "config.json").string();
  else if (fs::is_regular_file(spec.draft_model))
    flags.config = spec.draft_model;
  else
    flags.preset = spec.draft_model;  // test_model_preset names the known ones when it is none
  return flags;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

std::shared_ptr<const LoadedModel> load_draft_model(const SpeculativeConfig& spec, const ModelFlags& target_flags) {
  if (spec.method != SpeculativeMethod::kDraftModel) return nullptr;
  const ModelFlags flags = draft_model_flags(spec, target_flags);
  const std::optional<fs::path> target_tokenizer = find_tokenizer_dir(target_flags);
  const std::optional<fs::path> draft_tokenizer = find_tokenizer_dir(flags);
  if (target_tokenizer && draft_tokenizer && fs::absolute(*target_tokenizer) != fs::absolute(*draft_tokenizer) &&
      file_bytes(*target_tokenizer / "tokenizer.json") != file_bytes(*draft_tokenizer / "tokenizer.json"))
    throw Error(ErrorKind::kUnsupported,
                "the draft model's tokenizer (" + (*draft_tokenizer / "tokenizer.json").string() +
                    ") differs from the target's (" + (*target_tokenizer / "tokenizer.json").string() +
                    "): a draft must share the target's tokenizer");
  spdlog::info("speculative decoding: loading the draft model {}", spec.draft_model);
  return load_model_from_flags(flags);
}

void reserve_draft_memory(const LoadedModel& draft, BackendOptions& target_options) {
  const ModelConfig& c = draft.config;
  target_options.draft_kv_bytes_per_block = int64_t{c.num_layers} * 2 * c.num_kv_heads * target_options.block_size *
                                            kv_cache_vector_bytes(target_options.kv_cache_dtype, c.head_dim);
  target_options.draft_reserved_bytes = c.num_parameters() * 2 + kDraftActivationAllowance;
}

std::unique_ptr<Backend> create_draft_backend(std::shared_ptr<const LoadedModel> draft,
                                              const BackendOptions& target_options, const Backend& target) {
  BackendOptions options = target_options;
  options.device = target.name().rfind("cuda", 0) == 0 ? "cuda" : "cpu";
  // The draft's own limit when it is shorter: the engine then refuses a longer max_model_len, naming both.
  options.max_model_len =
      std::min<int>(target.max_model_len(), static_cast<int>(draft->config.max_position_embeddings));
  options.kv_cache_bytes = 0;
  options.kv_cache_num_blocks = target.kv_cache().num_blocks;
  options.draft_kv_bytes_per_block = 0;
  options.draft_reserved_bytes = 0;
  options.tensor_parallel_size = 1;
  options.tensor_parallel_same_device = false;
  try {
    return create_backend(std::move(draft), options);
  } catch (const Error& e) {
    throw Error(e.kind(),
                std::string(e.kind() == ErrorKind::kOutOfMemory ? "the draft model does not fit beside the target: "
                                                                : "the draft model's backend: ") +
                    e.what());
  }
}

SpeculativeBackends create_backends(std::shared_ptr<const LoadedModel> target_model, const ModelFlags& target_flags,
                                    BackendOptions target_options, const SpeculativeConfig& spec) {
  SpeculativeBackends backends;
  std::shared_ptr<const LoadedModel> draft = load_draft_model(spec, target_flags);
  if (draft) {
    if (draft->config.vocab_size != target_model->config.vocab_size)
      throw Error(ErrorKind::kUnsupported, "the draft model's vocabulary has " +
                                               std::to_string(draft->config.vocab_size) + " tokens, the target's " +
                                               std::to_string(target_model->config.vocab_size) +
                                               ": a draft must share the target's tokenizer");
    reserve_draft_memory(*draft, target_options);
  }
  backends.target = create_backend(std::move(target_model), target_options);
  if (!draft) return backends;
  backends.draft = create_draft_backend(std::move(draft), target_options, *backends.target);
  const MemoryPlan plan = backends.draft->memory_plan();
  spdlog::info("speculative decoding: draft model on {}: weights {}, KV cache {} ({} blocks, the target's block ids)",
               backends.draft->name(), plan.weights ? format_bytes(*plan.weights) : "?", format_bytes(plan.kv.bytes),
               plan.kv.num_blocks);
  return backends;
}

}  // namespace qinfer::cli
