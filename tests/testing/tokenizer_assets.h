// Locating the tokenizer test assets and reading the committed corpus and references (tests/data/tokenizer/).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace qinfer::test {

inline const std::filesystem::path kAssets = std::filesystem::path(QINFER_SOURCE_DIR) / ".assets";
inline const std::filesystem::path kTokenizerData = std::filesystem::path(QINFER_SOURCE_DIR) / "tests/data/tokenizer";
inline const std::filesystem::path kQwen3TokenizerJson = kAssets / "qwen3-tokenizer/tokenizer.json";

// The real Qwen3 tokenizer; a missing asset fails the calling test (ASSERT_NO_FATAL_FAILURE) with the fix.
inline void load_qwen3(std::optional<Tokenizer>& tokenizer) {
  ASSERT_TRUE(std::filesystem::exists(kQwen3TokenizerJson))
      << kQwen3TokenizerJson << " is missing: run tools/fetch-test-assets.sh";
  tokenizer.emplace(Tokenizer::from_file(kQwen3TokenizerJson));
}

// One JSON value per line.
inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<nlohmann::json> values;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) values.push_back(nlohmann::json::parse(line));
  }
  return values;
}

// FNV-1a 64, the hash tools/tokenizer_reference.py uses for the compact expected results.
inline uint64_t fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char b : bytes) hash = (hash ^ b) * 0x100000001B3ull;
  return hash;
}

inline uint64_t ids_hash(const std::vector<int32_t>& ids) {
  std::string bytes;
  for (int32_t id : ids) {
    const auto u = static_cast<uint32_t>(id);
    for (int shift = 0; shift < 32; shift += 8) bytes.push_back(static_cast<char>((u >> shift) & 0xFF));
  }
  return fnv1a64(bytes);
}

}  // namespace qinfer::test
