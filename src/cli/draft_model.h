// The draft model of --speculative-config's draft_model method: loaded like the target (its --load-format, dummy
// weight seed and hub flags; for dummy weights the draft's shape from "config", or from "model" as a directory with a
// config.json or a test-model preset name), checked to share the target's tokenizer, and given a backend of the
// target's kind on the same device whose KV pools are indexed by the target's block ids. docs/ENGINE.md,
// "Speculative decoding", has the memory accounting.
#pragma once

#include <memory>

#include "backend/backend.h"
#include "cli/model_loading.h"
#include "engine/speculation.h"
#include "model/qwen3_weights.h"

namespace qinfer::cli {

// Null unless `spec` is the draft_model method. Throws Error(kUnsupported) for a draft whose tokenizer.json differs
// from the target's, and what loading a model throws.
std::shared_ptr<const LoadedModel> load_draft_model(const SpeculativeConfig& spec, const ModelFlags& target_flags);

// Makes the target's budget pay for the draft too: the draft's KV bytes per block (as the GPU stores it, in the
// target's KV dtype) and its weights plus an activation allowance taken off the device budget first.
void reserve_draft_memory(const LoadedModel& draft, BackendOptions& target_options);

// The draft's backend with the target's options, block size and exactly its number of blocks and context. A draft
// that does not fit beside the target is refused with kOutOfMemory, named as the draft's.
std::unique_ptr<Backend> create_draft_backend(std::shared_ptr<const LoadedModel> draft,
                                              const BackendOptions& target_options, const Backend& target);

// Both at once for a command: the target's backend (with the draft's share reserved) and, for draft_model, the draft's.
struct SpeculativeBackends {
  std::unique_ptr<Backend> target;
  std::unique_ptr<Backend> draft;  // null without a draft model
};
SpeculativeBackends create_backends(std::shared_ptr<const LoadedModel> target_model, const ModelFlags& target_flags,
                                    BackendOptions target_options, const SpeculativeConfig& spec);

}  // namespace qinfer::cli
