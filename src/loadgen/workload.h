// The prompts a benchmark sends: random ones of a given length, or a JSONL dataset.
//
// Dataset file (--dataset FILE.jsonl): one JSON object per line, blank lines skipped:
//   {"prompt": "text", "output_len": 128}
// "prompt" (string) is required; "output_len" (integer >= 1) is optional and overrides --output-len for that prompt.
// With more requests than lines, the lines are used again in order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace qinfer {
class Tokenizer;
}

namespace qinfer::loadgen {

struct PromptSpec {
  std::string text;
  std::optional<long> prompt_tokens;  // known when made with a tokenizer
  std::optional<int> output_len;      // from the dataset; else the benchmark's --output-len
};

// `count` different prompts. With a tokenizer: random non-special token ids decoded to text and re-encoded until the
// text is exactly input_len tokens (prompt_tokens set). Without: input_len random common English words, about one
// token each. Deterministic for a seed.
std::vector<PromptSpec> random_prompts(int count, int input_len, uint64_t seed, const Tokenizer* tokenizer);

// `count` prompts from a JSONL file (format above). Throws Error(kNotFound) for a missing file and Error(kFormat)
// naming the file, line and field for bad lines or an empty file.
std::vector<PromptSpec> load_jsonl_prompts(const std::filesystem::path& path, int count);

}  // namespace qinfer::loadgen
