#include "grammar/token_vocabulary.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace qinfer::grammar {

TokenTrie::TokenTrie(std::vector<int32_t> ids, const std::vector<std::string>& bytes_of_id) : ids_(std::move(ids)) {
  const auto bytes_of = [&](int32_t id) -> const std::string& { return bytes_of_id[static_cast<size_t>(id)]; };
  std::sort(ids_.begin(), ids_.end(), [&](int32_t a, int32_t b) { return bytes_of(a) < bytes_of(b); });
  lcp_.assign(ids_.size(), 0);
  offset_.assign(1, 0);
  for (size_t i = 0; i < ids_.size(); ++i) {
    const std::string& cur = bytes_of(ids_[i]);
    data_ += cur;
    offset_.push_back(static_cast<uint32_t>(data_.size()));
    if (i == 0) continue;
    const std::string& prev = bytes_of(ids_[i - 1]);
    uint32_t n = 0;
    while (n < cur.size() && n < prev.size() && cur[n] == prev[n]) ++n;
    lcp_[i] = n;
  }
  // Tokens whose subtree is still open, shortest at the bottom: token i extends the top one while it shares at least
  // the top's length with token i - 1 (which extends the top too).
  subtree_end_.assign(ids_.size(), static_cast<uint32_t>(ids_.size()));
  std::vector<uint32_t> open;
  for (size_t i = 0; i < ids_.size(); ++i) {
    while (!open.empty() && bytes(open.back()).size() > lcp_[i]) {
      subtree_end_[open.back()] = static_cast<uint32_t>(i);
      open.pop_back();
    }
    open.push_back(static_cast<uint32_t>(i));
  }
}

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> stop_ids)
    : bytes_(std::move(token_bytes)), stop_ids_(std::move(stop_ids)) {
  std::vector<int32_t> short_ids, long_ids;
  for (int32_t id = 0; id < size(); ++id) {
    const size_t length = bytes_[static_cast<size_t>(id)].size();
    if (length == 0 || is_stop(id)) continue;
    (length <= kShortTokenBytes ? short_ids : long_ids).push_back(id);
    max_length_ = std::max(max_length_, length);
  }
  short_tokens_ = TokenTrie(std::move(short_ids), bytes_);
  long_tokens_ = TokenTrie(std::move(long_ids), bytes_);
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
