// Test helper for the differential test against xgrammar (tests/grammar/node): reads one JSON line per walk from stdin,
// {"schema": {...}, "tokens": [ids]}, and writes one JSON line per walk: for every prefix of the tokens (0 to all of
// them) the allowed token ids as [first, last] ranges, or {"error": message} when the schema does not compile or a
// token is refused.
//   grammar_masks TOKENIZER_JSON
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/grammar_compiler.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace qinfer;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: grammar_masks TOKENIZER_JSON < walks.jsonl\n");
    return 2;
  }
  const Tokenizer tokenizer = Tokenizer::from_file(argv[1]);
  grammar::GrammarCompiler compiler(grammar::TokenVocabulary::from_tokenizer(tokenizer, 151936, {151645, 151643}));
  std::string line;
  while (std::getline(std::cin, line)) {
    const auto walk = nlohmann::ordered_json::parse(line);
    nlohmann::json out;
    try {
      auto compiled = compiler.compile({grammar::Constraint::Kind::kJsonSchema, walk["schema"].dump(), {}});
      grammar::GrammarMatcher matcher(compiled);
      std::vector<uint32_t> mask(static_cast<size_t>(compiled->vocab().mask_words()));
      const auto tokens = walk["tokens"].get<std::vector<int32_t>>();
      nlohmann::json masks = nlohmann::json::array();
      for (size_t i = 0; i <= tokens.size(); ++i) {
        matcher.fill_mask(mask);
        nlohmann::json ranges = nlohmann::json::array();
        int64_t start = -1;
        for (int64_t id = 0; id <= compiled->vocab().size(); ++id) {
          const bool on = id < compiled->vocab().size() && (mask[static_cast<size_t>(id) / 32] >> (id % 32) & 1u);
          if (on && start < 0) start = id;
          if (!on && start >= 0) {
            ranges.push_back({start, id - 1});
            start = -1;
          }
        }
        masks.push_back(std::move(ranges));
        if (i < tokens.size() && !matcher.accept_token(tokens[i])) {
          out["refused_at"] = i;
          break;
        }
      }
      out["masks"] = std::move(masks);
    } catch (const std::exception& e) {
      out["error"] = e.what();
    }
    std::cout << out.dump() << "\n" << std::flush;
  }
  return 0;
}
