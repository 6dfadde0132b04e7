// Prompt lookup ("n-gram") proposals: the tokens that followed the latest earlier occurrence of the sequence's last
// n tokens, for the longest n in [min_n, max_n] that occurs. Code edits, quotes and repeated structure make the
// continuation of a repeated n-gram likely to repeat too; the target model verifies every proposal.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qinfer {

// Replaces `out` with `max_tokens` proposed continuations of `tokens` (prompt then output): the repetition implied
// by the match, continued periodically where it runs past the end; empty when no suffix of min_n..max_n tokens
// occurred before. Deterministic: a pure function of its arguments.
void propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t max_tokens,
                   std::vector<int32_t>& out);

}  // namespace qinfer
