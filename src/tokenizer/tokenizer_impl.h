// Internal state of qinfer::Tokenizer, shared by the loader (tokenizer_loader.cpp) and the encoder/decoder
// (tokenizer.cpp). Not part of the public API.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/split_pattern.h"
#include "tokenizer/string_id_map.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/word_cache.h"

namespace qinfer {

struct Tokenizer::Impl {
  std::unique_ptr<BpeModel> bpe;
  bool nfc = false;
  SplitPattern split_pattern = SplitPattern::kQwen2;
  AddedTokenMatcher raw_added_tokens;         // tokens with normalized = false, matched before normalization
  AddedTokenMatcher normalized_added_tokens;  // tokens with normalized = true, matched in normalized text

  StringIdMap token_ids;                  // vocab strings (byte-level form) and added token contents → id
  std::string decoded_bytes;              // what each id decodes to, concatenated
  std::vector<uint32_t> decoded_offsets;  // [vocab_size + 1] slices of decoded_bytes; known[id] says if id exists
  std::vector<uint8_t> known;             // [vocab_size]
  std::vector<uint8_t> special;           // [vocab_size]
  int32_t vocab_size = 0;

  WordCache cache;

  static std::shared_ptr<const Impl> load(const std::filesystem::path& tokenizer_json);
};

}  // namespace qinfer
