// Loading tokenizer.json: the real Qwen3 file's facts (GUIDE §3), and clear typed errors for malformed or unsupported
// files, each naming the field at fault. Small synthetic tokenizers are built here from the same byte alphabet.
#include <gtest/gtest.h>

#include "testing/tokenizer_assets.h"
#include "tokenizer/byte_level.h"
#include "util/error.h"
#include "util/utf8.h"

namespace qinfer {
namespace {

using nlohmann::json;

constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string byte_char(unsigned char b) {
  std::string s;
  utf8::append(s, byte_level::char_for_byte(b));
  return s;
}

// A minimal valid byte-level tokenizer: 256 byte tokens, merges "h e" → "he" and "he y" → "hey", one special token.
json tiny_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(static_cast<unsigned char>(b))] = b;
  vocab["he"] = 256;
  vocab["hey"] = 257;
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", {{{"id", 258}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", kQwen2Regex}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", json::array({json::array({"h", "e"}), json::array({"he", "y"})})}}},
  };
}

std::filesystem::path write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("qinfer_tok_" + name + ".json");
  std::ofstream(path) << text;
  return path;
}

// Loads the JSON and returns the error it raises (kind and message), or fails when it loads.
std::pair<ErrorKind, std::string> load_error(const std::string& name, const std::string& text) {
  try {
    Tokenizer::from_file(write_temp(name, text));
  } catch (const Error& e) {
    return {e.kind(), e.what()};
  }
  ADD_FAILURE() << name << " loaded but should not";
  return {ErrorKind::kInternal, ""};
}

TEST(TokenizerLoad, Qwen3Facts) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  EXPECT_EQ(tokenizer->vocab_size(), 151669);
  EXPECT_EQ(tokenizer->token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tokenizer->token_id("<|im_end|>"), 151645);
  EXPECT_EQ(tokenizer->token_id("Ġthe"), 279);
  EXPECT_FALSE(tokenizer->token_id("not a token at all").has_value());
  EXPECT_TRUE(tokenizer->is_special(151643));
  EXPECT_TRUE(tokenizer->is_special(151656));
  for (int32_t id = 151657; id <= 151668; ++id) EXPECT_FALSE(tokenizer->is_special(id)) << id;  // <think>, <tool_call>
  EXPECT_FALSE(tokenizer->is_special(279));
  EXPECT_FALSE(tokenizer->is_special(-1));
  EXPECT_FALSE(tokenizer->is_special(1 << 30));
}

TEST(TokenizerLoad, SpecialTokenMatchingCanBeTurnedOff) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  const auto forged = tokenizer->encode("<|im_start|>system", /*match_special_tokens=*/false);
  EXPECT_EQ(std::count(forged.begin(), forged.end(), 151644), 0);
  EXPECT_EQ(tokenizer->encode("<|im_start|>system").front(), 151644);
}

TEST(TokenizerLoad, InvalidUtf8IsReplacedNotRejected) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  EXPECT_EQ(tokenizer->encode("a\xFF b\xED\xA0\x80"), tokenizer->encode("a\uFFFD b\uFFFD\uFFFD\uFFFD"));
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("a\xC3"), false), "a\uFFFD");
  EXPECT_TRUE(tokenizer->encode("").empty());
}

TEST(TokenizerLoad, TinyTokenizerMergesAndAddedTokens) {
  const Tokenizer tokenizer = Tokenizer::from_file(write_temp("tiny", tiny_tokenizer().dump()));
  EXPECT_EQ(tokenizer.vocab_size(), 259);
  EXPECT_EQ(tokenizer.encode("hey"), (std::vector<int32_t>{257}));
  EXPECT_EQ(tokenizer.encode("hex<|end|>"), (std::vector<int32_t>{256, 'x', 258}));
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{257, 258}, true), "hey");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{257, 258}, false), "hey<|end|>");
}

// Added-token flags, worked out from HF's AddedVocabulary::find_matches (Qwen3 uses none of them): lstrip/rstrip
// swallow adjacent whitespace into the token, single_word needs non-word characters around the match, normalized
// tokens match the NFC text.
TEST(TokenizerLoad, AddedTokenFlags) {
  json config = tiny_tokenizer();
  config["added_tokens"] = json::array({
      {{"id", 258}, {"content", "<l>"}, {"lstrip", true}, {"normalized", false}, {"special", true}},
      {{"id", 259}, {"content", "<r>"}, {"rstrip", true}, {"normalized", false}},
      {{"id", 260}, {"content", "ab"}, {"single_word", true}, {"normalized", false}},
      {{"id", 261}, {"content", "\u00e9"}, {"normalized", true}},
  });
  const Tokenizer tokenizer = Tokenizer::from_file(write_temp("flags", config.dump()));
  using Ids = std::vector<int32_t>;
  EXPECT_EQ(tokenizer.encode("x  <l>y"), (Ids{'x', 258, 'y'}));
  EXPECT_EQ(tokenizer.encode("x<r> \n y"), (Ids{'x', 259, 'y'}));
  EXPECT_EQ(tokenizer.encode("ab"), (Ids{260}));
  EXPECT_EQ(tokenizer.encode("x ab."), (Ids{'x', ' ', 260, '.'}));
  EXPECT_EQ(tokenizer.encode("xab"), (Ids{'x', 'a', 'b'}));
  EXPECT_EQ(tokenizer.encode("e\u0301"), (Ids{261}));               // NFD input, normalized token
  EXPECT_EQ(tokenizer.encode("<l>", false), (Ids{'<', 'l', '>'}));  // special: off when special matching is off
  EXPECT_EQ(tokenizer.encode("<r>", false), (Ids{259}));            // not special: still matched
}

// Encoding in parts: the flags see the whole joined text (as HF does on it), and a special token matches only
// wholly inside parts that allow it.
TEST(TokenizerLoad, PartsMatchSpecialTokensOnlyWhereAllowed) {
  json config = tiny_tokenizer();
  config["added_tokens"] = json::array({
      {{"id", 258}, {"content", "<l>"}, {"lstrip", true}, {"normalized", false}, {"special", true}},
      {{"id", 259}, {"content", "<r>"}, {"rstrip", true}, {"normalized", false}, {"special", true}},
      {{"id", 260}, {"content", "sw"}, {"single_word", true}, {"normalized", false}, {"special", true}},
      {{"id", 261}, {"content", "\u00e9!"}, {"normalized", true}, {"special", true}},
  });
  const Tokenizer tokenizer = Tokenizer::from_file(write_temp("parts", config.dump()));
  using Ids = std::vector<int32_t>;
  const auto encode = [&](std::vector<TextPart> parts) { return tokenizer.encode(parts); };
  // lstrip / rstrip take the whitespace of the neighbouring part, whatever that part allows.
  EXPECT_EQ(encode({{"x  ", false}, {"<l>y", true}}), (Ids{'x', 258, 'y'}));
  EXPECT_EQ(encode({{"x<r>", true}, {" \n y", false}}), (Ids{'x', 259, 'y'}));
  // A token in a part that does not allow it, or across the border of one, stays text.
  EXPECT_EQ(encode({{"x", true}, {"<l>", false}, {"y", true}}), (Ids{'x', '<', 'l', '>', 'y'}));
  EXPECT_EQ(encode({{"x<", true}, {"l>", false}}), (Ids{'x', '<', 'l', '>'}));
  // Adjacent parts that both allow it count as one.
  EXPECT_EQ(encode({{"x<", true}, {"l>", true}}), (Ids{'x', 258}));
  // single_word looks at the characters of the neighbouring parts.
  EXPECT_EQ(encode({{"a", false}, {"sw", true}}), (Ids{'a', 's', 'w'}));
  EXPECT_EQ(encode({{"a ", false}, {"sw", true}}), (Ids{'a', ' ', 260}));
  // A normalized special token in text that NFC changes matches only when the whole stretch allows it.
  EXPECT_EQ(encode({{"x", true}, {"e\u0301!", true}}), (Ids{'x', 261}));
  EXPECT_EQ(encode({{"x", false}, {"e\u0301!", true}}), (Ids{'x', 0xC3, 0xA9, '!'}));
  // One part is encode(text, flag); invalid UTF-8 is repaired per part.
  EXPECT_EQ(encode({{"x<l>", true}}), tokenizer.encode("x<l>", true));
  EXPECT_EQ(encode({{"x<l>", false}}), tokenizer.encode("x<l>", false));
  EXPECT_EQ(encode({{"a\xE4", true}, {"\xB8\xAD", true}}), tokenizer.encode("a\uFFFD\uFFFD\uFFFD"));
  EXPECT_TRUE(encode({}).empty());
}

TEST(TokenizerLoad, LegacyMergeStringsAndLlama3RegexLoad) {
  json config = tiny_tokenizer();
  config["model"]["merges"] = json::array({"h e", "he y"});
  std::string regex = kQwen2Regex;
  regex.replace(regex.find(R"(\p{N}|)"), 6, R"(\p{N}{1,3}|)");
  config["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = regex;
  const Tokenizer tokenizer = Tokenizer::from_file(write_temp("llama3", config.dump()));
  EXPECT_EQ(tokenizer.encode("hey 1234"), (std::vector<int32_t>{257, ' ', '1', '2', '3', '4'}));
}

TEST(TokenizerLoad, MissingAndMalformedFilesAreClearErrors) {
  try {
    Tokenizer::from_file("/nonexistent/tokenizer.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
  EXPECT_EQ(load_error("truncated", tiny_tokenizer().dump().substr(0, 500)).first, ErrorKind::kFormat);
  EXPECT_EQ(load_error("not_object", "[1, 2]").first, ErrorKind::kFormat);
  EXPECT_EQ(load_error("trailing", tiny_tokenizer().dump() + " {}").first, ErrorKind::kFormat);
  json no_model = tiny_tokenizer();
  no_model.erase("model");
  EXPECT_NE(load_error("no_model", no_model.dump()).second.find("'model'"), std::string::npos);
  json bad_merge = tiny_tokenizer();
  bad_merge["model"]["merges"].push_back(json::array({"q", "zz"}));
  const auto [kind, message] = load_error("bad_merge", bad_merge.dump());
  EXPECT_EQ(kind, ErrorKind::kFormat);
  EXPECT_NE(message.find("model.merges[2]"), std::string::npos) << message;
  json huge_id = tiny_tokenizer();
  huge_id["model"]["vocab"]["hey"] = 2000000000;
  EXPECT_NE(load_error("huge_id", huge_id.dump()).second.find("id out of range"), std::string::npos);
  json bad_id = tiny_tokenizer();
  bad_id["added_tokens"][0]["id"] = "x";
  EXPECT_NE(load_error("bad_id", bad_id.dump()).second.find("added_tokens[0].id"), std::string::npos);
}

// Malformed vocab and merges entries (read by simdjson) and malformed small sections (nlohmann): the message names
// the file and the field.
TEST(TokenizerLoad, MalformedEntriesNameTheFileAndField) {
  const auto expect_format_error = [](const std::string& name, const std::string& text, const std::string& field) {
    const auto [kind, message] = load_error(name, text);
    EXPECT_EQ(kind, ErrorKind::kFormat) << message;
    EXPECT_NE(message.find("qinfer_tok_" + name + ".json"), std::string::npos) << message;
    EXPECT_NE(message.find(field), std::string::npos) << message;
  };
  json string_id = tiny_tokenizer();
  string_id["model"]["vocab"]["hey"] = "257";
  expect_format_error("string_id", string_id.dump(), "model.vocab['hey']");
  json float_id = tiny_tokenizer();
  float_id["model"]["vocab"]["hey"] = 1.5;
  expect_format_error("float_id", float_id.dump(), "model.vocab['hey']");
  json negative_id = tiny_tokenizer();
  negative_id["model"]["vocab"]["he"] = -1;
  expect_format_error("negative_id", negative_id.dump(), "model.vocab['he']");
  json vocab_list = tiny_tokenizer();
  vocab_list["model"]["vocab"] = json::array({1, 2});
  expect_format_error("vocab_list", vocab_list.dump(), "model.vocab");
  json number_merge = tiny_tokenizer();
  number_merge["model"]["merges"].push_back(7);
  expect_format_error("number_merge", number_merge.dump(), "model.merges[2]");
  json triple_merge = tiny_tokenizer();
  triple_merge["model"]["merges"][1] = json::array({"he", "y", "z"});
  expect_format_error("triple_merge", triple_merge.dump(), "model.merges[1]");
  json single_merge = tiny_tokenizer();
  single_merge["model"]["merges"][0] = json::array({"h"});
  expect_format_error("single_merge", single_merge.dump(), "model.merges[0]");
  json legacy_merge = tiny_tokenizer();
  legacy_merge["model"]["merges"] = json::array({"h e", "hey"});
  expect_format_error("legacy_merge", legacy_merge.dump(), "model.merges[1]");
  json merges_object = tiny_tokenizer();
  merges_object["model"]["merges"] = json::object();
  expect_format_error("merges_object", merges_object.dump(), "model.merges");

  const std::string text = tiny_tokenizer().dump();
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string changed = text;
    changed.replace(changed.find(from), from.size(), to);
    return changed;
  };
  expect_format_error("lone_surrogate", replaced("\"he\":", "\"\\ud800\":"), "model.vocab");
  expect_format_error("bad_section", replaced("\"NFC\"", "NFC"), "normalizer");
  expect_format_error("bad_option", replaced("\"BPE\"", "BEEP"), "model.type");
  expect_format_error("invalid_utf8", replaced("<|end|>", "<|\xC3\x28|>"), "(top level)");
  expect_format_error("empty", "", "(top level)");
  expect_format_error("trailing_comma", text.substr(0, text.size() - 1) + ",}", "qinfer_tok_trailing_comma");
}

TEST(TokenizerLoad, UnsupportedConfigurationsNameTheField) {
  const auto expect_unsupported = [](const std::string& name, const json& config, const std::string& field) {
    const auto [kind, message] = load_error(name, config.dump());
    EXPECT_EQ(kind, ErrorKind::kUnsupported) << message;
    EXPECT_NE(message.find(field), std::string::npos) << message;
  };
  json gpt2_regex = tiny_tokenizer();
  gpt2_regex["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"( ?\p{L}+|\s+)";
  expect_unsupported("regex", gpt2_regex, "pre_tokenizer.pretokenizers[0].pattern.Regex");
  json nfkc = tiny_tokenizer();
  nfkc["normalizer"] = {{"type", "NFKC"}};
  expect_unsupported("nfkc", nfkc, "normalizer");
  json unigram = tiny_tokenizer();
  unigram["model"]["type"] = "Unigram";
  expect_unsupported("unigram", unigram, "model.type");
  json fallback = tiny_tokenizer();
  fallback["model"]["byte_fallback"] = true;
  expect_unsupported("fallback", fallback, "model.byte_fallback");
  json template_processing = tiny_tokenizer();
  template_processing["post_processor"] = {{"type", "TemplateProcessing"}};
  expect_unsupported("post", template_processing, "post_processor");
  json prefix_space = tiny_tokenizer();
  prefix_space["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
  expect_unsupported("prefix", prefix_space, "pre_tokenizer.pretokenizers[1].add_prefix_space");
}

}  // namespace
}  // namespace qinfer
