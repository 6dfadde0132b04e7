// Differential fuzzing against a second implementation: random Unicode strings (all planes, whitespace-heavy,
// special-token fragments, combining marks, contractions) must encode to the same ids in qinfer and in
// @lenml/tokenizers (node), and decode(encode(s)) must give NFC(s). Fixed seed, bounded count (< 60 s).
// The corpus sets whose HF reference is not committed (mixed, other_scripts) are compared with the JS encoder too.
// Known JS deviation, kept out of the generator: JavaScript's \s lacks U+0085 (NEL) and includes U+FEFF (BOM), while
// HF's Oniguruma uses the White_Space property (NEL yes, BOM no). Those cases are pinned in test_split_pattern.cpp.
#include <gtest/gtest.h>

#include <random>

#include "testing/js_reference_encoder.h"
#include "testing/tokenizer_assets.h"
#include "tokenizer/unicode_classes.h"
#include "util/utf8.h"

namespace qinfer {
namespace {

constexpr uint64_t kSeed = 20261129;
constexpr int kStrings = 4000;

class StringGenerator {
 public:
  explicit StringGenerator(uint64_t seed) : rng_(seed) {}

  std::string next() {
    switch (pick(5)) {
      case 0:
        return random_code_points();
      case 1:
        return from_pieces(kWhitespacePieces);
      case 2:
        return from_pieces(kSpecialPieces);
      case 3:
        return combining_marks();
      default:
        return from_pieces(kWordPieces);
    }
  }

 private:
  static constexpr const char* kWhitespacePieces[] = {" ",  "  ",     "\t",     "\n",     "\r\n",   "\r",  "\v",
                                                      "\f", "\u00a0", "\u3000", "\u2028", "\u2029", "a",   "1",
                                                      "中", "!",      "\u200b", "\u2003", "x y",    "\n\n"};
  static constexpr const char* kSpecialPieces[] = {"<|im_start|>",
                                                   "<|im_end|>",
                                                   "<|endoftext|>",
                                                   "<think>",
                                                   "</think>",
                                                   "<tool_call>",
                                                   "</tool_call>",
                                                   "<|im_",
                                                   "start|>",
                                                   "<|",
                                                   "|>",
                                                   "<",
                                                   ">",
                                                   "|",
                                                   "user",
                                                   "\n",
                                                   " ",
                                                   "<|im_end",
                                                   "</",
                                                   "tool_response>",
                                                   "<|vision_pad|>"};
  static constexpr const char* kWordPieces[] = {"'s",
                                                "'S",
                                                "'ll",
                                                "'LL",
                                                "'Re",
                                                "'ve",
                                                "'M",
                                                "'d",
                                                "'t",
                                                "'",
                                                "ſ",
                                                "don",
                                                "I",
                                                "you",
                                                "123",
                                                "4",
                                                "٣",
                                                "Ⅻ",
                                                "½",
                                                " ",
                                                ".",
                                                "...",
                                                "?!",
                                                "\n",
                                                "😀",
                                                "👍🏽",
                                                "👨‍👩‍👧",
                                                "🏳️‍🌈",
                                                "é",
                                                "中文",
                                                "abc",
                                                "ABC",
                                                "_",
                                                "-",
                                                "#",
                                                "$",
                                                "€",
                                                "ß",
                                                "ǅ",
                                                "ｶ"};

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  template <size_t N>
  std::string from_pieces(const char* const (&pieces)[N]) {
    std::string s;
    for (size_t i = 0, n = 1 + pick(16); i < n; ++i) s += pieces[pick(N)];
    return s;
  }

  char32_t random_scalar() {
    static constexpr char32_t kPlaneStarts[] = {0x0, 0x10000, 0x20000, 0x30000, 0xE0000, 0xF0000};
    while (true) {
      const size_t r = pick(100);
      const char32_t plane = r < 55   ? kPlaneStarts[0]
                             : r < 80 ? kPlaneStarts[1]
                             : r < 90 ? kPlaneStarts[2]
                             : r < 94 ? kPlaneStarts[3]
                             : r < 97 ? kPlaneStarts[4]
                                      : kPlaneStarts[5];
      const char32_t cp = plane + static_cast<char32_t>(pick(0x10000));
      if ((cp >= 0xD800 && cp < 0xE000) || cp == 0x85 || cp == 0xFEFF) continue;
      if (pick(4) == 0 && cp >= 0x80) return static_cast<char32_t>(pick(0x80));  // keep some ASCII glue
      return cp;
    }
  }

  std::string random_code_points() {
    std::string s;
    for (size_t i = 0, n = 1 + pick(24); i < n; ++i) utf8::append(s, random_scalar());
    return s;
  }

  std::string combining_marks() {
    static constexpr char32_t kBases[] = {'a', 'e', 'o', 'A', 'n', 0x3B1, 0x1100, 0x1161, 0x11A8, 0xAC00, ' ', '1'};
    std::string s;
    for (size_t i = 0, n = 1 + pick(12); i < n; ++i) {
      utf8::append(s, kBases[pick(std::size(kBases))]);
      for (size_t m = 0, marks = pick(4); m < marks; ++m) {
        const char32_t mark =
            pick(3) == 0 ? 0x1DC0 + static_cast<char32_t>(pick(0x40)) : 0x300 + static_cast<char32_t>(pick(0x70));
        utf8::append(s, mark);
      }
    }
    return s;
  }

  std::mt19937_64 rng_;
};

void expect_same_as_js(const Tokenizer& tokenizer, const std::vector<std::string>& texts, const std::string& name) {
  const auto js_ids = test::encode_with_js(texts, name);
  ASSERT_EQ(js_ids.size(), texts.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (tokenizer.encode(texts[i]) != js_ids[i] && ++mismatches <= 10) {
      ADD_FAILURE() << name << " #" << i << " differs from @lenml/tokenizers: " << nlohmann::json(texts[i]).dump();
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << texts.size();
}

TEST(DifferentialFuzz, RandomStringsMatchTheJsEncoderAndRoundTrip) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  StringGenerator generator(kSeed);
  std::vector<std::string> texts;
  for (int i = 0; i < kStrings; ++i) texts.push_back(generator.next());
  for (const auto& text : texts) {
    ASSERT_EQ(tokenizer->decode(tokenizer->encode(text), false), unicode::to_nfc(text)) << nlohmann::json(text).dump();
  }
  expect_same_as_js(*tokenizer, texts, "random");
}

TEST(DifferentialFuzz, CorpusSetsWithoutHfReferenceMatchTheJsEncoder) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  for (const char* set : {"mixed", "other_scripts"}) {
    std::vector<std::string> texts;
    for (const auto& doc : test::read_jsonl(test::kTokenizerData / "corpus" / (std::string(set) + ".jsonl"))) {
      texts.push_back(doc.get<std::string>());
    }
    expect_same_as_js(*tokenizer, texts, set);
  }
}

}  // namespace
}  // namespace qinfer
