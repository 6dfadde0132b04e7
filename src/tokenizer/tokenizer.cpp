#include "tokenizer/tokenizer.h"

#include <algorithm>

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

// Appends the ids of the added tokens `matcher` finds in text (special ones only inside `special_allowed`) and hands
// each stretch between them, as [begin, end), to encode_stretch, in order.
template <typename EncodeStretch>
void split_at_added_tokens(const AddedTokenMatcher& matcher, std::string_view text,
                           std::span<const ByteRange> special_allowed, std::vector<int32_t>& ids,
                           EncodeStretch&& encode_stretch) {
  if (matcher.empty()) {
    if (!text.empty()) encode_stretch(0, text.size());
    return;
  }
  std::vector<TextSegment> segments;
  matcher.split(text, special_allowed, segments);
  for (const TextSegment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      encode_stretch(segment.begin, segment.end);
    }
  }
}

// The ranges of `allowed` that fall inside [begin, end), relative to begin.
std::vector<ByteRange> ranges_within(std::span<const ByteRange> allowed, size_t begin, size_t end) {
  std::vector<ByteRange> local;
  for (const ByteRange& range : allowed) {
    const size_t from = std::max(range.begin, begin);
    const size_t to = std::min(range.end, end);
    if (from < to) local.push_back({from - begin, to - begin});
  }
  return local;
}

// Normalizes a stretch of text that holds no raw added token, then splits out normalized added tokens; special ones
// only inside `special_allowed` (relative to the stretch). When normalization changes the text, offsets no longer
// map: special tokens then match only if the whole stretch allows them.
void encode_unmatched_text(const Tokenizer::Impl& impl, std::string_view text, std::vector<ByteRange> special_allowed,
                           std::vector<std::string_view>& pieces, std::vector<int32_t>& ids) {
  std::string normalized;
  if (impl.nfc && !unicode::is_nfc_stable(text)) {
    const bool whole =
        special_allowed.size() == 1 && special_allowed[0].begin == 0 && special_allowed[0].end == text.size();
    normalized = unicode::to_nfc(text);
    text = normalized;
    special_allowed.clear();
    if (whole) special_allowed.push_back({0, text.size()});
  }
  split_at_added_tokens(impl.normalized_added_tokens, text, special_allowed, ids, [&](size_t begin, size_t end) {
    encode_plain_text(impl, text.substr(begin, end - begin), pieces, ids);
  });
}

// Valid UTF-8 text → ids, special tokens matched only inside `special_allowed` (ascending, disjoint).
std::vector<int32_t> encode_valid(const Tokenizer::Impl& impl, std::string_view text,
                                  std::span<const ByteRange> special_allowed) {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<std::string_view> pieces;
  const auto encode_stretch = [&](size_t begin, size_t end) {
    encode_unmatched_text(impl, text.substr(begin, end - begin), ranges_within(special_allowed, begin, end), pieces,
                          ids);
  };
  split_at_added_tokens(impl.raw_added_tokens, text, special_allowed, ids, encode_stretch);
  return ids;
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  return Tokenizer(Impl::load(tokenizer_json));
}

Tokenizer Tokenizer::from_model_dir(const std::filesystem::path& model_dir) {
  return from_file(model_dir / "tokenizer.json");
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool match_special_tokens) const {
  const TextPart part{text, match_special_tokens};
  return encode(std::span<const TextPart>(&part, 1));
}

std::vector<int32_t> Tokenizer::encode(std::span<const TextPart> parts) const {
  if (parts.size() == 1 && utf8::is_valid(parts[0].text)) {
    const ByteRange whole{0, parts[0].text.size()};
    return encode_valid(*impl_, parts[0].text,
                        parts[0].match_special_tokens ? std::span(&whole, 1) : std::span<const ByteRange>());
  }
  // The joined text, and the parts that allow special tokens as its byte ranges (adjacent ones merged).
  std::string text;
  std::vector<ByteRange> special_allowed;
  for (const TextPart& part : parts) {
    const size_t begin = text.size();
    if (utf8::is_valid(part.text)) {
      text += part.text;
    } else {
      text += utf8::to_valid_lossy(part.text);
    }
    if (!part.match_special_tokens || text.size() == begin) continue;
    if (!special_allowed.empty() && special_allowed.back().end == begin) {
      special_allowed.back().end = text.size();
    } else {
      special_allowed.push_back({begin, text.size()});
    }
  }
  return encode_valid(*impl_, text, special_allowed);
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
