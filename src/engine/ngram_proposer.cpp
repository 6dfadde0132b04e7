#include "engine/ngram_proposer.h"

#include <algorithm>

namespace qinfer {

void propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t max_tokens,
                   std::vector<int32_t>& out) {
  out.clear();
  const int64_t length = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0 || min_n <= 0) return;
  for (int64_t n = std::min<int64_t>(max_n, length - 1); n >= min_n; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(length - n));
    // The latest occurrence that ends before the suffix itself, so at least one token follows it.
    for (int64_t start = length - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      // Token length + j is predicted as the one `shift` earlier; past the end of `tokens` that is an earlier
      // proposal, so a short period repeats for all max_tokens.
      const int64_t shift = length - n - start;
      for (int64_t j = 0; j < max_tokens; ++j) {
        const int64_t source = length + j - shift;
        out.push_back(source < length ? tokens[static_cast<size_t>(source)]
                                      : out[static_cast<size_t>(source - length)]);
      }
      return;
    }
  }
}

}  // namespace qinfer
