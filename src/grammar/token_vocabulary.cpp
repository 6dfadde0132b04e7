#include "grammar/token_vocabulary.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace qinfer::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> stop_ids)
    : bytes_(std::move(token_bytes)), stop_ids_(std::move(stop_ids)) {
  for (int32_t id = 0; id < size(); ++id)
    if (!bytes_[static_cast<size_t>(id)].empty() && !is_stop(id)) sorted_.push_back(id);
  std::sort(sorted_.begin(), sorted_.end(),
            [&](int32_t a, int32_t b) { return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)]; });
  lcp_.assign(sorted_.size(), 0);
  sorted_offset_.assign(1, 0);
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& cur = bytes_[static_cast<size_t>(sorted_[i])];
    sorted_data_ += cur;
    sorted_offset_.push_back(static_cast<uint32_t>(sorted_data_.size()));
    max_length_ = std::max(max_length_, cur.size());
    if (i == 0) continue;
    const std::string& prev = bytes_[static_cast<size_t>(sorted_[i - 1])];
    uint32_t n = 0;
    while (n < cur.size() && n < prev.size() && cur[n] == prev[n]) ++n;
    lcp_[i] = n;
  }
  // Tokens whose subtree is still open, shortest at the bottom: token i extends the top one while it shares at least
  // the top's length with token i - 1 (which extends the top too).
  subtree_end_.assign(sorted_.size(), static_cast<uint32_t>(sorted_.size()));
  std::vector<uint32_t> open;
  for (size_t i = 0; i < sorted_.size(); ++i) {
    while (!open.empty() && bytes_[static_cast<size_t>(sorted_[open.back()])].size() > lcp_[i]) {
      subtree_end_[open.back()] = static_cast<uint32_t>(i);
      open.pop_back();
    }
    open.push_back(static_cast<uint32_t>(i));
  }
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::from_tokenizer(const Tokenizer& tokenizer, int vocab_size,
                                                                       std::vector<int32_t> stop_ids) {
  std::vector<std::string> bytes(static_cast<size_t>(vocab_size));
  const int known = std::min(vocab_size, tokenizer.vocab_size());
  for (int32_t id = 0; id < known; ++id) bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id, true);
  return std::make_shared<const TokenVocabulary>(std::move(bytes), std::move(stop_ids));
}

bool TokenVocabulary::is_stop(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

}  // namespace qinfer::grammar
