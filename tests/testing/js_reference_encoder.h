// The second tokenizer implementation of the differential tests: @lenml/tokenizers (a transformers.js fork, installed
// by tools/fetch-test-assets.sh) run by node over js_reference_encoder.cjs, with the real Qwen3 tokenizer files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qinfer::test {

// The JS encoder's ids for every text (special tokens matched, nothing added), one array per text; `name` keeps the
// temporary files of concurrent callers apart. A failure to run node is a test failure (and an empty result).
std::vector<std::vector<int32_t>> encode_with_js(const std::vector<std::string>& texts, const std::string& name);

}  // namespace qinfer::test
