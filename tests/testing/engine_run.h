// Test helper: an engine driven to completion on the calling thread.
#pragma once

#include <vector>

#include "engine/engine.h"

namespace qinfer {

// Submits every request, steps the engine until it has no work left, and returns each request's streamed deltas in
// submission order.
std::vector<std::vector<StreamDelta>> run_to_completion(Engine& engine, const std::vector<GenerationRequest>& requests);

}  // namespace qinfer
