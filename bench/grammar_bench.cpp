// Structured-output speed (docs/PERFORMANCE.md, "Structured output"): per schema of tests/data/grammar/schemas.jsonl,
// the compile time (schema -> grammar -> automaton), then random walks over the real Qwen3 vocabulary timing every
// token mask (GrammarMatcher::fill_mask) and advance, as a server sees them: the compiler is warmed up first (the
// splits of JSON strings and numbers, shared by every schema, as `qinfer serve` does at start-up). "first" masks are a
// schema's first request (each state's split computed on its first use); "warm" masks repeat the walks afterwards.
//   grammar_bench TOKENIZER_JSON SCHEMAS_JSONL [walks per schema] [max tokens per walk]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace qinfer;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Walks `count` random documents; appends each mask's time to `times`. Returns the tokens generated.
size_t walk(const std::shared_ptr<const grammar::CompiledGrammar>& g, int count, int max_tokens, uint32_t seed,
            std::vector<double>& times) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> mask(static_cast<size_t>(g->vocab().mask_words()));
  std::vector<int32_t> allowed;
  size_t tokens = 0;
  for (int w = 0; w < count; ++w) {
    grammar::GrammarMatcher m(g);
    for (int t = 0; t < max_tokens && !m.is_terminated(); ++t) {
      const auto start = Clock::now();
      m.fill_mask(mask);
      times.push_back(seconds_since(start));
      allowed.clear();
      for (size_t i = 0; i < mask.size(); ++i)
        for (uint32_t bits = mask[i]; bits; bits &= bits - 1)
          allowed.push_back(static_cast<int32_t>(i * 32 + static_cast<size_t>(__builtin_ctz(bits))));
      if (allowed.empty()) break;
      int32_t id = allowed[rng() % allowed.size()];
      if (m.is_complete() && rng() % 4 == 0) id = g->vocab().stop_ids()[0];  // end some documents early
      m.accept_token(id);
      ++tokens;
    }
  }
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: grammar_bench TOKENIZER_JSON SCHEMAS_JSONL [walks] [max_tokens]\n");
    return 2;
  }
  const int walks = argc > 3 ? std::stoi(argv[3]) : 4;
  const int max_tokens = argc > 4 ? std::stoi(argv[4]) : 200;
  const Tokenizer tokenizer = Tokenizer::from_file(argv[1]);
  grammar::GrammarCompiler compiler(grammar::TokenVocabulary::from_tokenizer(tokenizer, 151936, {151645, 151643}));
  auto warm_start = Clock::now();
  compiler.warm_up();
  std::printf("compiler warm-up (JSON strings, numbers, any value): %.1f ms\n", seconds_since(warm_start) * 1e3);
  std::ifstream in(argv[2]);
  std::string line;
  std::vector<double> compile_times, cold, warm;
  std::printf("%-20s %10s %8s %12s %12s %12s\n", "schema", "compile ms", "states", "first p50 us", "first p99 us",
              "warm p99 us");
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto entry = nlohmann::ordered_json::parse(line);
    auto start = Clock::now();
    auto g = compiler.compile({grammar::Constraint::Kind::kJsonSchema, entry["schema"].dump(), {}});
    compile_times.push_back(seconds_since(start));
    const int states = g->automaton().num_states();
    std::vector<double> schema_cold, schema_warm;
    walk(g, walks, max_tokens, 1, schema_cold);
    walk(g, walks, max_tokens, 1, schema_warm);
    std::printf("%-20s %10.2f %8d %12.1f %12.1f %12.1f\n", entry["name"].get<std::string>().c_str(),
                compile_times.back() * 1e3, states, percentile(schema_cold, 0.5) * 1e6,
                percentile(schema_cold, 0.99) * 1e6, percentile(schema_warm, 0.99) * 1e6);
    cold.insert(cold.end(), schema_cold.begin(), schema_cold.end());
    warm.insert(warm.end(), schema_warm.begin(), schema_warm.end());
  }
  std::printf(
      "\nall schemas: compile median %.2f ms; masks (%zu) first-request median %.1f us p99 %.1f us max %.1f ms; "
      "warm median %.1f us p99 %.1f us\n",
      percentile(compile_times, 0.5) * 1e3, cold.size(), percentile(cold, 0.5) * 1e6, percentile(cold, 0.99) * 1e6,
      percentile(cold, 1.0) * 1e3, percentile(warm, 0.5) * 1e6, percentile(warm, 0.99) * 1e6);
  return 0;
}
