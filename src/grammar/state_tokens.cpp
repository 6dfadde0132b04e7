#include "grammar/state_tokens.h"

#include <algorithm>
#include <map>

#include "grammar/parse_state.h"

namespace qinfer::grammar {

StateTokens compute_state_tokens(const Automaton& automaton, const TokenVocabulary& vocab, int32_t state) {
  Parser parser(automaton);
  const size_t max_len = vocab.max_token_length();
  // levels[d]: the stacks after the first d bytes of the current token; exits[d]: the rule completed there.
  std::vector<StackSet> levels(max_len + 1);
  levels[0].add(std::vector<int32_t>{kBottom, state});
  size_t valid = 0;  // levels[0..valid] hold the previous token's prefix
  std::vector<int32_t> accepted;
  std::map<std::string, std::vector<int32_t>> uncertain;
  const std::vector<int32_t>& sorted = vocab.sorted();
  const std::vector<uint32_t>& lcp = vocab.lcp();
  for (size_t i = 0; i < sorted.size(); ++i) {
    const int32_t id = sorted[i];
    const std::string_view bytes = vocab.bytes(id);
    size_t depth = std::min<size_t>(lcp[i], valid);
    // Extend while something can still consume.
    while (depth < bytes.size() && levels[depth].size() > 0) {
      parser.step(levels[depth], static_cast<unsigned char>(bytes[depth]), levels[depth + 1]);
      ++depth;
    }
    valid = depth;
    if (depth == bytes.size() && !levels[depth].dead()) {
      accepted.push_back(id);
      continue;
    }
    // The rule completed after d < size bytes (d >= 1: the first byte is always the state's own) for some d <= depth.
    for (size_t d = 1; d <= depth && d < bytes.size(); ++d)
      if (levels[d].complete) uncertain[std::string(bytes.substr(d))].push_back(id);
  }
  StateTokens out;
  out.num_accepted = accepted.size();
  if (accepted.size() * 32 > static_cast<size_t>(vocab.size())) {
    out.accepted_mask.assign(static_cast<size_t>(vocab.mask_words()), 0);
    for (int32_t id : accepted) out.accepted_mask[static_cast<size_t>(id) / 32] |= 1u << (id % 32);
  } else {
    std::sort(accepted.begin(), accepted.end());
    out.accepted_ids = std::move(accepted);
  }
  std::vector<uint8_t> counted(static_cast<size_t>(vocab.size()), 0);
  for (auto& [remainder, ids] : uncertain) {
    uint32_t shared = 0;
    if (!out.remainders.empty()) {
      const std::string& prev = out.remainders.back();
      while (shared < prev.size() && shared < remainder.size() && prev[shared] == remainder[shared]) ++shared;
    }
    out.remainder_lcp.push_back(shared);
    out.remainder_begin.push_back(static_cast<uint32_t>(out.remainder_tokens.size()));
    out.remainders.push_back(remainder);
    for (int32_t id : ids) {
      out.remainder_tokens.push_back(id);
      if (!counted[static_cast<size_t>(id)]) counted[static_cast<size_t>(id)] = 1, ++out.num_uncertain;
    }
  }
  out.remainder_begin.push_back(static_cast<uint32_t>(out.remainder_tokens.size()));
  return out;
}

}  // namespace qinfer::grammar
