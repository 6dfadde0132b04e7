#include "loadgen/workload.h"

#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace qinfer::loadgen {

namespace {

// Common words that byte-level BPE vocabularies hold as one token (with their leading space).
constexpr std::array<std::string_view, 48> kWords = {
    "time",  "year",   "people", "way",     "day",     "man",     "thing",    "woman",   "life",       "child",
    "world", "school", "state",  "family",  "student", "group",   "country",  "problem", "hand",       "part",
    "place", "case",   "week",   "company", "system",  "program", "question", "work",    "government", "number",
    "night", "point",  "home",   "water",   "room",    "mother",  "area",     "money",   "story",      "fact",
    "month", "lot",    "right",  "study",   "book",    "eye",     "job",      "word"};

constexpr int kMaxTokenizerRounds = 16;

std::string random_words(int count, std::mt19937_64& rng) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    if (i > 0) text.push_back(' ');
    text.append(kWords[rng() % kWords.size()]);
  }
  return text;
}

int32_t random_plain_token(const Tokenizer& tokenizer, std::mt19937_64& rng) {
  while (true) {
    const auto id = static_cast<int32_t>(rng() % static_cast<uint64_t>(tokenizer.vocab_size()));
    if (!tokenizer.is_special(id)) return id;
  }
}

// Decoding random ids and encoding the text again rarely gives the same ids: merge the text back into input_len
// tokens by cutting or extending the re-encoded ids until the round trip is stable.
PromptSpec exact_length_prompt(const Tokenizer& tokenizer, int input_len, std::mt19937_64& rng) {
  std::vector<int32_t> ids;
  for (int i = 0; i < input_len; ++i) ids.push_back(random_plain_token(tokenizer, rng));
  PromptSpec spec;
  for (int round = 0; round < kMaxTokenizerRounds; ++round) {
    spec.text = tokenizer.decode(ids, /*skip_special_tokens=*/true);
    ids = tokenizer.encode(spec.text, /*match_special_tokens=*/false);
    if (static_cast<int>(ids.size()) == input_len) break;
    if (static_cast<int>(ids.size()) > input_len) ids.resize(static_cast<size_t>(input_len));
    while (static_cast<int>(ids.size()) < input_len) ids.push_back(random_plain_token(tokenizer, rng));
  }
  spec.prompt_tokens = static_cast<long>(tokenizer.encode(spec.text, false).size());
  return spec;
}

}  // namespace

std::vector<PromptSpec> random_prompts(int count, int input_len, uint64_t seed, const Tokenizer* tokenizer) {
  if (input_len < 1) throw Error(ErrorKind::kInvalidArgument, "--input-len must be at least 1");
  std::mt19937_64 rng(seed);
  std::vector<PromptSpec> prompts;
  prompts.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    if (tokenizer) {
      prompts.push_back(exact_length_prompt(*tokenizer, input_len, rng));
    } else {
      PromptSpec spec;
      spec.text = random_words(input_len, rng);
      prompts.push_back(std::move(spec));
    }
  }
  return prompts;
}

std::vector<PromptSpec> load_jsonl_prompts(const std::filesystem::path& path, int count) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kNotFound, "dataset " + path.string() + ": cannot open");
  std::vector<PromptSpec> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.is_object())
      throw Error(ErrorKind::kFormat, where + ": expected one JSON object per line");
    const auto prompt = json.find("prompt");
    if (prompt == json.end() || !prompt->is_string())
      throw Error(ErrorKind::kFormat, where + ": field 'prompt' expected a string");
    PromptSpec spec;
    spec.text = prompt->get<std::string>();
    if (const auto output_len = json.find("output_len"); output_len != json.end() && !output_len->is_null()) {
      if (!output_len->is_number_integer() || output_len->get<long>() < 1)
        throw Error(ErrorKind::kFormat,
                    where + ": field 'output_len' expected an integer >= 1, got " + output_len->dump());
      spec.output_len = output_len->get<int>();
    }
    lines.push_back(std::move(spec));
  }
  if (lines.empty()) throw Error(ErrorKind::kFormat, "dataset " + path.string() + ": no prompts");
  std::vector<PromptSpec> prompts;
  for (int i = 0; i < count; ++i) prompts.push_back(lines[static_cast<size_t>(i) % lines.size()]);
  return prompts;
}

}  // namespace qinfer::loadgen
