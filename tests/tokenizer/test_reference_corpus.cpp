// Exact parity with Hugging Face tokenizers 0.23.2 on the committed corpus: ids, ids with special-token matching off,
// and decodes, all from tools/tokenizer_reference.py run on the GPU test machine (tests/data/tokenizer/README.md).
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <sstream>

#include "testing/tokenizer_assets.h"
#include "tokenizer/incremental_detokenizer.h"
#include "util/utf8.h"

namespace qinfer {
namespace {

using test::fnv1a64;
using test::ids_hash;

std::string hex(uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016" PRIx64, value);
  return buffer;
}

class ReferenceCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceCorpus, IdsAndDecodesMatchHuggingFace) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  const auto docs = test::read_jsonl(test::kTokenizerData / "corpus" / (GetParam() + ".jsonl"));
  std::ifstream expected_file(test::kTokenizerData / "expected" / (GetParam() + ".tsv"));
  ASSERT_TRUE(expected_file.good());
  std::string line;
  size_t index = 0, mismatches = 0;
  while (std::getline(expected_file, line)) {
    ASSERT_LT(index, docs.size());
    const std::string doc = docs[index].get<std::string>();
    std::istringstream fields(line);
    size_t count = 0, count_no_special = 0;
    std::string ids_hex, keep_hex, skip_hex, ids_no_special_hex;
    fields >> count >> ids_hex >> keep_hex >> skip_hex >> count_no_special >> ids_no_special_hex;
    const auto ids = tokenizer->encode(doc);
    const auto ids_no_special = tokenizer->encode(doc, /*match_special_tokens=*/false);
    const bool ok = ids.size() == count && hex(ids_hash(ids)) == ids_hex &&
                    hex(fnv1a64(tokenizer->decode(ids, false))) == keep_hex &&
                    hex(fnv1a64(tokenizer->decode(ids, true))) == skip_hex &&
                    ids_no_special.size() == count_no_special && hex(ids_hash(ids_no_special)) == ids_no_special_hex;
    if (!ok && ++mismatches <= 5) {
      ADD_FAILURE() << GetParam() << " document " << index << " differs from HF (" << ids.size() << " vs " << count
                    << " ids): " << nlohmann::json(doc.substr(0, 120)).dump();
    }
    ++index;
  }
  EXPECT_EQ(index, docs.size());
  EXPECT_EQ(mismatches, 0u) << "of " << index << " documents";
}

INSTANTIATE_TEST_SUITE_P(Sets, ReferenceCorpus,
                         ::testing::Values("english", "chinese", "code", "edge", "mixed", "other_scripts"));

// Full ids (both special-token modes) and decodes of a short set against expected/<set>_ids.jsonl.
void expect_full_ids_match(const std::string& set) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  const auto docs = test::read_jsonl(test::kTokenizerData / "corpus" / (set + ".jsonl"));
  const auto expected = test::read_jsonl(test::kTokenizerData / "expected" / (set + "_ids.jsonl"));
  ASSERT_EQ(docs.size(), expected.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::string doc = docs[i].get<std::string>();
    const auto ids = tokenizer->encode(doc);
    EXPECT_EQ(ids, expected[i]["ids"].get<std::vector<int32_t>>()) << nlohmann::json(doc).dump();
    EXPECT_EQ(tokenizer->encode(doc, false), expected[i]["ids_no_special"].get<std::vector<int32_t>>())
        << nlohmann::json(doc).dump();
    EXPECT_EQ(tokenizer->decode(ids, false), expected[i]["decode"].get<std::string>());
    EXPECT_EQ(tokenizer->decode(ids, true), expected[i]["decode_skip"].get<std::string>());
  }
}

TEST(ReferenceEdgeCases, FullIdsAndDecodesMatchHuggingFace) { expect_full_ids_match("edge"); }

// U+0085 (NEL) and U+FEFF (BOM): the split follows Oniguruma's documented \s (NEL in, BOM out), which the JS fuzz
// reference contradicts, so only an HF run can confirm it. Skipped until that run's output is committed.
TEST(ReferenceEdgeCases, NelAndBomMatchHuggingFace) {
  if (!std::filesystem::exists(test::kTokenizerData / "expected/nel_bom_ids.jsonl")) {
    GTEST_SKIP()
        << "tests/data/tokenizer/expected/nel_bom_ids.jsonl not produced yet: run tools/tokenizer_reference.py "
           "on the GPU machine (tests/data/tokenizer/README.md)";
  }
  expect_full_ids_match("nel_bom");
}

// Random id sequences (unknown ids, special tokens, lone UTF-8 bytes): decode and streaming decode equal HF.
TEST(ReferenceDecode, RandomIdsDecodeLikeHuggingFace) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  for (const auto& record : test::read_jsonl(test::kTokenizerData / "expected/decode_random.jsonl")) {
    const auto ids = record["ids"].get<std::vector<int32_t>>();
    for (bool skip : {false, true}) {
      const std::string expected = record[skip ? "text_skip" : "text"].get<std::string>();
      EXPECT_EQ(tokenizer->decode(ids, skip), expected) << record["ids"].dump();
      IncrementalDetokenizer stream(*tokenizer, skip);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string delta = stream.push(id);
        EXPECT_TRUE(utf8::is_valid(delta));
        streamed += delta;
      }
      streamed += stream.flush();
      EXPECT_EQ(streamed, expected) << record["ids"].dump();
    }
  }
}

}  // namespace
}  // namespace qinfer
