// tokenizer.json split into its parts with simdjson's On-Demand parser. The vocab and merges (almost all of the
// ~11 MB file) go straight into a StringIdMap and string views without building a DOM, which keeps loading well
// under 100 ms; every other section is small and is handed to nlohmann::json for the loader's field-by-field checks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/string_id_map.h"

namespace qinfer {

struct TokenizerJson {
  StringIdMap vocab;  // model.vocab: byte-level strings → id
  int32_t max_vocab_id = -1;
  // model.merges as (left, right), from either the ["left", "right"] or the older "left right" form. The views point
  // into `string_storage` and stay valid as long as this object lives.
  std::vector<std::pair<std::string_view, std::string_view>> merges;
  nlohmann::json model_options = nlohmann::json::object();  // every model field except vocab and merges
  nlohmann::json sections = nlohmann::json::object();       // every top-level field except model
  std::shared_ptr<const void> string_storage;
};

// Throws Error(kNotFound) when the file is missing, Error(kFormat) naming the file, the field at fault and the byte
// offset when it is not valid JSON or a vocab/merges entry has the wrong shape, or when an id exceeds max_token_id.
TokenizerJson read_tokenizer_json(const std::filesystem::path& path, int64_t max_token_id);

}  // namespace qinfer
