#include "tokenizer/tokenizer.h"

#include "tokenizer/byte_hash.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode_classes.h"
#include "util/utf8.h"

namespace qinfer {
namespace {

// Pre-tokenizes one stretch of normalized text and appends the BPE ids of its pieces.
void encode_plain_text(const Tokenizer::Impl& impl, std::string_view text, std::vector<std::string_view>& pieces,
                       std::vector<int32_t>& ids) {
  pieces.clear();
  split_into_pieces(text, impl.split_pattern, pieces);
  for (std::string_view piece : pieces) {
    if (piece.size() > WordCache::kMaxPieceBytes) {
      impl.bpe->encode_piece(piece, ids);
      continue;
    }
    const uint64_t hash = hash_bytes(piece);
    if (impl.cache.lookup(piece, hash, ids)) continue;
    const size_t first = ids.size();
    impl.bpe->encode_piece(piece, ids);
    impl.cache.insert(piece, hash, ids.data() + first, ids.size() - first);
  }
}

// Normalizes a stretch of text that holds no raw added token, then splits out normalized added tokens.
void encode_unmatched_text(const Tokenizer::Impl& impl, std::string_view text, bool match_special,
                           std::vector<std::string_view>& pieces, std::vector<int32_t>& ids) {
  std::string normalized;
  if (impl.nfc && !unicode::is_nfc_stable(text)) {
    normalized = unicode::to_nfc(text);
    text = normalized;
  }
  if (impl.normalized_added_tokens.empty()) {
    encode_plain_text(impl, text, pieces, ids);
    return;
  }
  std::vector<TextSegment> segments;
  impl.normalized_added_tokens.split(text, !match_special, segments);
  for (const TextSegment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      encode_plain_text(impl, text.substr(segment.begin, segment.end - segment.begin), pieces, ids);
    }
  }
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  return Tokenizer(Impl::load(tokenizer_json));
}

Tokenizer Tokenizer::from_model_dir(const std::filesystem::path& model_dir) {
  return from_file(model_dir / "tokenizer.json");
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool match_special_tokens) const {
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::to_valid_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<std::string_view> pieces;
  if (impl_->raw_added_tokens.empty()) {
    encode_unmatched_text(*impl_, text, match_special_tokens, pieces, ids);
    return ids;
  }
  std::vector<TextSegment> segments;
  impl_->raw_added_tokens.split(text, !match_special_tokens, segments);
  for (const TextSegment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      encode_unmatched_text(*impl_, text.substr(segment.begin, segment.end - segment.begin), match_special_tokens,
                            pieces, ids);
    }
  }
  return ids;
}

std::string_view Tokenizer::token_bytes(int32_t id, bool skip_special_tokens) const {
  if (id < 0 || id >= impl_->vocab_size || !impl_->known[id]) return {};
  if (skip_special_tokens && impl_->special[id]) return {};
  const uint32_t begin = impl_->decoded_offsets[id];
  return std::string_view(impl_->decoded_bytes).substr(begin, impl_->decoded_offsets[id + 1] - begin);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) bytes += token_bytes(id, skip_special_tokens);
  if (utf8::is_valid(bytes)) return bytes;
  return utf8::to_valid_lossy(bytes);
}

int Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const { return impl_->token_ids.find(token); }

bool Tokenizer::is_special(int32_t id) const { return id >= 0 && id < impl_->vocab_size && impl_->special[id]; }

}  // namespace qinfer
