// qinfer::Tokenizer — byte-level BPE driven by a Hugging Face tokenizer.json, giving exactly the ids and text that
// HF `tokenizers` gives (Qwen2/Qwen3 family; Llama 3's split regex also loads). Immutable after loading, cheap to
// copy (shared state), and safe to use from many threads at once.
//
// Supported tokenizer.json: model BPE (no dropout, no byte fallback, no subword prefix/suffix, ignore_merges either
// way); normalizer null or NFC; pre_tokenizer Sequence[Split(Qwen2 or Llama 3 regex, Isolated), ByteLevel(no prefix
// space, no regex)]; decoder ByteLevel; post_processor null or ByteLevel; added_tokens with all their flags. Anything
// else is refused with Error(kUnsupported) naming the field.
//
// Invalid UTF-8 given to encode() is never an error: each maximal invalid byte sequence is replaced by U+FFFD first
// (Rust's String::from_utf8_lossy, which is what HF does with bytes it is handed). decode() output is always valid
// UTF-8 by the same rule.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qinfer {

// One piece of a text encoded in parts, and whether added tokens flagged `special` may match inside it.
struct TextPart {
  std::string_view text;
  bool match_special_tokens = true;
};

class Tokenizer {
 public:
  // Throws Error(kNotFound) for a missing file, Error(kFormat) for malformed JSON or fields (naming the field),
  // Error(kUnsupported) for configurations we do not implement.
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  // Loads DIR/tokenizer.json.
  static Tokenizer from_model_dir(const std::filesystem::path& model_dir);

  // Text → ids. With match_special_tokens = false, added tokens flagged `special` are not recognised (their text is
  // encoded as ordinary bytes) — HF's `encode_special_tokens = True`; non-special added tokens such as <think> still
  // match. Use it for untrusted user content so it cannot forge chat-control tokens. Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool match_special_tokens = true) const;

  // Encodes the concatenation of `parts` exactly as encode() encodes that one text (added tokens found in the whole
  // text with HF's single_word / lstrip / rstrip flags, each stretch between them pre-tokenized as one), except that
  // a special token matches only where its text lies wholly inside parts that allow special tokens (adjacent ones
  // count as one). Client text goes in parts with match_special_tokens = false: it cannot forge control tokens, and
  // a prompt whose client text holds none gets exactly the ids of encode(joined text). Invalid UTF-8 is repaired per
  // part. Thread-safe.
  std::vector<int32_t> encode(std::span<const TextPart> parts) const;

  // Ids → text, as HF's decode: ids outside the vocabulary are ignored, and with skip_special_tokens only added
  // tokens flagged `special` are dropped.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // The bytes one token contributes to decoded text (may be part of a UTF-8 character); empty for unknown ids and,
  // with skip_special_tokens, for special tokens. What IncrementalDetokenizer builds on.
  std::string_view token_bytes(int32_t id, bool skip_special_tokens) const;

  // Number of ids the tokenizer knows: model vocab plus added tokens (HF's get_vocab_size(with_added_tokens=True));
  // a model's embedding table may be larger.
  int vocab_size() const;
  // Id of an added token's content or of a vocab entry as written in tokenizer.json (byte-level form, e.g. "Ġthe").
  std::optional<int32_t> token_id(std::string_view token) const;
  // True for added tokens flagged `special` (the ones skip_special_tokens drops).
  bool is_special(int32_t id) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace qinfer
