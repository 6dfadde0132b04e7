// Builds Tokenizer::Impl from tokenizer.json: the parts read by read_tokenizer_json (tokenizer_json.h) are validated
// field by field and turned into the BPE tables, the decode table and the added-token matchers.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/unicode_classes.h"
#include "util/error.h"
#include "util/utf8.h"

namespace qinfer {
namespace {

using nlohmann::json;

// Ids index dense tables, so an absurd id in a malformed file must be an error, not a giant allocation.
constexpr int64_t kMaxTokenId = (1 << 24) - 1;

struct LoadContext {
  std::filesystem::path file;

  [[noreturn]] void unsupported(const std::string& field, const json& value, const std::string& supported) const {
    throw Error(ErrorKind::kUnsupported, file.string() + ": " + field + " = " + value.dump() +
                                             " is not supported (supported: " + supported + ")");
  }
  [[noreturn]] void malformed(const std::string& field, const std::string& expected, const json& value) const {
    throw Error(ErrorKind::kFormat,
                file.string() + ": field '" + field + "' expected " + expected + ", got " + value.dump());
  }
  std::string type_of(const json& section, const std::string& field) const {
    if (!section.is_object() || !section.contains("type") || !section["type"].is_string()) {
      malformed(field + ".type", "a string",
                section.is_object() && section.contains("type") ? section["type"] : json());
    }
    return section["type"].get<std::string>();
  }
  bool flag(const json& section, const std::string& field, const std::string& name, bool fallback) const {
    if (!section.contains(name) || section[name].is_null()) return fallback;
    if (!section[name].is_boolean()) malformed(field + "." + name, "a boolean", section[name]);
    return section[name].get<bool>();
  }
};

void check_model_options(const LoadContext& ctx, const json& options) {
  if (!options.contains("type") || options["type"] != "BPE") {
    ctx.unsupported("model.type", options.value("type", json()), "\"BPE\"");
  }
  if (options.contains("dropout") && !options["dropout"].is_null()) {
    ctx.unsupported("model.dropout", options["dropout"], "null");
  }
  if (ctx.flag(options, "model", "byte_fallback", false)) ctx.unsupported("model.byte_fallback", true, "false");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (options.contains(affix) && !options[affix].is_null() && options[affix] != "") {
      ctx.unsupported(std::string("model.") + affix, options[affix], "null or \"\"");
    }
  }
}

void configure_normalizer(const LoadContext& ctx, const json& normalizer, Tokenizer::Impl& impl) {
  if (normalizer.is_null()) return;
  const std::string type = ctx.type_of(normalizer, "normalizer");
  if (type == "NFC") {
    impl.nfc = true;
  } else if (type == "Sequence" && normalizer.contains("normalizers") && normalizer["normalizers"].is_array() &&
             normalizer["normalizers"].size() <= 1) {
    if (!normalizer["normalizers"].empty()) configure_normalizer(ctx, normalizer["normalizers"][0], impl);
  } else {
    ctx.unsupported("normalizer", normalizer, "null or NFC");
  }
}

void check_byte_level(const LoadContext& ctx, const json& section, const std::string& field) {
  if (ctx.flag(section, field, "add_prefix_space", true)) {
    ctx.unsupported(field + ".add_prefix_space", true, "false");
  }
}

void configure_pre_tokenizer(const LoadContext& ctx, const json& pre_tokenizer, Tokenizer::Impl& impl) {
  const std::string supported = "Sequence[Split(Qwen2 or Llama 3 regex, Isolated), ByteLevel(use_regex false)]";
  if (pre_tokenizer.is_null() || ctx.type_of(pre_tokenizer, "pre_tokenizer") != "Sequence" ||
      !pre_tokenizer.contains("pretokenizers") || !pre_tokenizer["pretokenizers"].is_array() ||
      pre_tokenizer["pretokenizers"].size() != 2) {
    ctx.unsupported("pre_tokenizer", pre_tokenizer, supported);
  }
  const json& split = pre_tokenizer["pretokenizers"][0];
  const json& byte_level = pre_tokenizer["pretokenizers"][1];
  if (ctx.type_of(split, "pre_tokenizer.pretokenizers[0]") != "Split") {
    ctx.unsupported("pre_tokenizer.pretokenizers[0].type", split["type"], "\"Split\"");
  }
  const json pattern = split.value("pattern", json());
  if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string()) {
    ctx.unsupported("pre_tokenizer.pretokenizers[0].pattern", pattern, "{\"Regex\": Qwen2 or Llama 3 regex}");
  }
  const auto known = split_pattern_from_regex(pattern["Regex"].get<std::string>());
  if (!known) {
    ctx.unsupported("pre_tokenizer.pretokenizers[0].pattern.Regex", pattern["Regex"], "the Qwen2 or Llama 3 regex");
  }
  impl.split_pattern = *known;
  if (split.value("behavior", json()) != "Isolated") {
    ctx.unsupported("pre_tokenizer.pretokenizers[0].behavior", split.value("behavior", json()), "\"Isolated\"");
  }
  if (ctx.flag(split, "pre_tokenizer.pretokenizers[0]", "invert", false)) {
    ctx.unsupported("pre_tokenizer.pretokenizers[0].invert", true, "false");
  }
  if (ctx.type_of(byte_level, "pre_tokenizer.pretokenizers[1]") != "ByteLevel") {
    ctx.unsupported("pre_tokenizer.pretokenizers[1].type", byte_level["type"], "\"ByteLevel\"");
  }
  check_byte_level(ctx, byte_level, "pre_tokenizer.pretokenizers[1]");
  if (ctx.flag(byte_level, "pre_tokenizer.pretokenizers[1]", "use_regex", true)) {
    ctx.unsupported("pre_tokenizer.pretokenizers[1].use_regex", true, "false");
  }
}

void check_decoder_and_post_processor(const LoadContext& ctx, const json& decoder, const json& post_processor) {
  if (decoder.is_null() || ctx.type_of(decoder, "decoder") != "ByteLevel") {
    ctx.unsupported("decoder", decoder, "ByteLevel");
  }
  if (!post_processor.is_null() && ctx.type_of(post_processor, "post_processor") != "ByteLevel") {
    ctx.unsupported("post_processor", post_processor, "null or ByteLevel");
  }
}

std::vector<AddedToken> read_added_tokens(const LoadContext& ctx, const json& added_tokens) {
  std::vector<AddedToken> tokens;
  if (added_tokens.is_null()) return tokens;
  if (!added_tokens.is_array()) ctx.malformed("added_tokens", "an array", added_tokens);
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const json& entry = added_tokens[i];
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    if (!entry.is_object()) ctx.malformed(field, "an object", entry);
    AddedToken token;
    if (!entry.contains("id") || !entry["id"].is_number_unsigned() || entry["id"].get<uint64_t>() > kMaxTokenId) {
      ctx.malformed(field + ".id", "a non-negative integer", entry.value("id", json()));
    }
    token.id = entry["id"].get<int32_t>();
    if (!entry.contains("content") || !entry["content"].is_string()) {
      ctx.malformed(field + ".content", "a string", entry.value("content", json()));
    }
    token.content = entry["content"].get<std::string>();
    if (!utf8::is_valid(token.content)) ctx.malformed(field + ".content", "valid UTF-8", entry["content"]);
    token.single_word = ctx.flag(entry, field, "single_word", false);
    token.lstrip = ctx.flag(entry, field, "lstrip", false);
    token.rstrip = ctx.flag(entry, field, "rstrip", false);
    token.normalized = ctx.flag(entry, field, "normalized", true);
    token.special = ctx.flag(entry, field, "special", false);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// Builds the two added-token matchers: non-normalized tokens match raw text, normalized ones normalized text.
void build_added_token_matchers(const std::vector<AddedToken>& tokens, Tokenizer::Impl& impl) {
  std::vector<AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  // HF orders special tokens before the others in its matcher; with leftmost-longest only ties of equal content
  // could tell the difference, and the first registration wins for those.
  for (bool special_pass : {true, false}) {
    for (const AddedToken& token : tokens) {
      if (token.special != special_pass || token.content.empty()) continue;
      if (token.normalized) {
        normalized.push_back(token);
        normalized_patterns.push_back(impl.nfc ? unicode::to_nfc(token.content) : token.content);
      } else {
        raw.push_back(token);
        raw_patterns.push_back(token.content);
      }
    }
  }
  impl.raw_added_tokens = AddedTokenMatcher(std::move(raw), raw_patterns);
  impl.normalized_added_tokens = AddedTokenMatcher(std::move(normalized), normalized_patterns);
}

void build_decode_table(const TokenizerJson& model, const std::vector<AddedToken>& added, Tokenizer::Impl& impl) {
  int32_t max_id = model.max_vocab_id;
  for (const AddedToken& token : added) max_id = std::max(max_id, token.id);
  impl.vocab_size = max_id + 1;
  std::vector<std::string_view> text_of(impl.vocab_size);
  impl.known.assign(impl.vocab_size, 0);
  impl.special.assign(impl.vocab_size, 0);
  model.vocab.for_each([&](std::string_view token, int32_t id) {
    text_of[id] = token;
    impl.known[id] = 1;
  });
  for (const AddedToken& token : added) {  // added tokens take precedence over the model vocab, as in HF
    text_of[token.id] = token.content;
    impl.known[token.id] = 1;
    impl.special[token.id] = token.special ? 1 : 0;
  }
  impl.decoded_offsets.assign(impl.vocab_size + 1, 0);
  for (int32_t id = 0; id < impl.vocab_size; ++id) {
    impl.decoded_offsets[id] = static_cast<uint32_t>(impl.decoded_bytes.size());
    // HF's ByteLevel decoder maps a token through the byte alphabet, or keeps its UTF-8 when it is not in it.
    if (auto bytes = byte_level::decode_chars(text_of[id])) {
      impl.decoded_bytes += *bytes;
    } else {
      impl.decoded_bytes += text_of[id];
    }
  }
  impl.decoded_offsets[impl.vocab_size] = static_cast<uint32_t>(impl.decoded_bytes.size());
}

// Resolves merges[begin, end) to ids; returns the index of the first merge naming a string not in the vocab, or end.
size_t resolve_merges(const TokenizerJson& model, size_t begin, size_t end, std::vector<BpeModel::Merge>& merges) {
  std::string joined;
  for (size_t i = begin; i < end; ++i) {
    const auto& [left, right] = model.merges[i];
    joined.assign(left).append(right);
    const auto left_id = model.vocab.find(left);
    const auto right_id = model.vocab.find(right);
    const auto merged_id = model.vocab.find(joined);
    if (!left_id || !right_id || !merged_id) return i;
    merges[i] = {*left_id, *right_id, *merged_id};
  }
  return end;
}

std::unique_ptr<BpeModel> build_bpe(const LoadContext& ctx, const TokenizerJson& model) {
  // Hash lookups dominate loading; they are independent, so large merge lists are resolved on a few threads.
  const size_t count = model.merges.size();
  std::vector<BpeModel::Merge> merges(count);
  const size_t num_threads = count < 20000 ? 1 : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  std::vector<size_t> first_bad(num_threads);
  std::vector<std::thread> workers;
  for (size_t t = 0; t < num_threads; ++t) {
    const size_t begin = count * t / num_threads, end = count * (t + 1) / num_threads;
    workers.emplace_back([&, t, begin, end] {
      const size_t stop = resolve_merges(model, begin, end, merges);
      first_bad[t] = stop == end ? count : stop;
    });
  }
  for (auto& worker : workers) worker.join();
  const size_t bad = *std::min_element(first_bad.begin(), first_bad.end());
  if (bad < count) {
    const auto& [left, right] = model.merges[bad];
    const std::string joined = std::string(left) + std::string(right);
    const std::string missing = !model.vocab.find(left)    ? std::string(left)
                                : !model.vocab.find(right) ? std::string(right)
                                                           : joined;
    throw Error(ErrorKind::kFormat, ctx.file.string() + ": model.merges[" + std::to_string(bad) + "] uses '" + missing +
                                        "', which is not in model.vocab");
  }
  int32_t byte_ids[256];
  std::string one_char;
  for (int b = 0; b < 256; ++b) {
    one_char.clear();
    utf8::append(one_char, byte_level::char_for_byte(static_cast<unsigned char>(b)));
    byte_ids[b] = model.vocab.find(one_char).value_or(-1);
  }
  const bool ignore_merges = ctx.flag(model.model_options, "model", "ignore_merges", false);
  StringIdMap raw_vocab;
  if (ignore_merges) {
    raw_vocab.reserve(model.vocab.size());
    model.vocab.for_each([&](std::string_view token, int32_t id) {
      if (auto bytes = byte_level::decode_chars(token)) raw_vocab.insert(*bytes, id);
    });
  }
  return std::make_unique<BpeModel>(byte_ids, merges, ignore_merges, std::move(raw_vocab));
}

}  // namespace

std::shared_ptr<const Tokenizer::Impl> Tokenizer::Impl::load(const std::filesystem::path& tokenizer_json) {
  const LoadContext ctx{tokenizer_json};
  TokenizerJson parsed = read_tokenizer_json(tokenizer_json, kMaxTokenId);
  const auto section = [&](const char* name) { return parsed.sections.value(name, json()); };

  auto impl = std::make_shared<Impl>();
  check_model_options(ctx, parsed.model_options);
  for (const char* unsupported_if_set : {"truncation", "padding"}) {
    if (!section(unsupported_if_set).is_null())
      ctx.unsupported(unsupported_if_set, section(unsupported_if_set), "null");
  }
  configure_normalizer(ctx, section("normalizer"), *impl);
  configure_pre_tokenizer(ctx, section("pre_tokenizer"), *impl);
  check_decoder_and_post_processor(ctx, section("decoder"), section("post_processor"));
  const std::vector<AddedToken> added = read_added_tokens(ctx, section("added_tokens"));

  impl->bpe = build_bpe(ctx, parsed);
  build_decode_table(parsed, added, *impl);
  build_added_token_matchers(added, *impl);
  impl->token_ids = std::move(parsed.vocab);
  for (const AddedToken& token : added) impl->token_ids.insert_or_assign(token.content, token.id);
  return impl;
}

}  // namespace qinfer
