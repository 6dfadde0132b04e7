#include "engine/speculation.h"

#include <algorithm>

namespace qinfer {

const char* speculative_method_name(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::kNgram:
      return "ngram";
    case SpeculativeMethod::kDraftModel:
      return "draft_model";
    case SpeculativeMethod::kNone:
      break;
  }
  return "none";
}

void SpeculationState::adapt_after_verify(int32_t proposed, int32_t accepted, int32_t max_k) {
  if (accepted >= proposed)
    k = std::min(k + 1, max_k);
  else if (accepted > 0)
    k = accepted;
  else
    k /= 2;
}

void SpeculationState::adapt_after_shadow(int32_t sampled) {
  if (k == 0 && shadow_token >= 0 && sampled == shadow_token) k = 1;
  shadow_token = -1;
}

void SpeculationStats::record(int32_t proposed, int32_t accepted) {
  ++verifications;
  draft_tokens += static_cast<uint64_t>(proposed);
  accepted_tokens += static_cast<uint64_t>(accepted);
  if (accepted_per_position.size() < static_cast<size_t>(proposed))
    accepted_per_position.resize(static_cast<size_t>(proposed), 0);
  for (int32_t i = 0; i < accepted; ++i) ++accepted_per_position[static_cast<size_t>(i)];
}

double SpeculationStats::mean_accepted_length() const {
  if (verifications == 0) return 0;
  return 1.0 + static_cast<double>(accepted_tokens) / static_cast<double>(verifications);
}

SpeculationStats SpeculationStats::since(const SpeculationStats& earlier) const {
  SpeculationStats delta = *this;
  delta.verifications -= earlier.verifications;
  delta.draft_tokens -= earlier.draft_tokens;
  delta.accepted_tokens -= earlier.accepted_tokens;
  for (size_t i = 0; i < earlier.accepted_per_position.size() && i < delta.accepted_per_position.size(); ++i)
    delta.accepted_per_position[i] -= earlier.accepted_per_position[i];
  return delta;
}

}  // namespace qinfer
