#include "testing/js_reference_encoder.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "testing/tokenizer_assets.h"

namespace qinfer::test {

std::vector<std::vector<int32_t>> encode_with_js(const std::vector<std::string>& texts, const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto input = dir / ("qinfer_js_" + name + ".in.jsonl");
  const auto output = dir / ("qinfer_js_" + name + ".out.jsonl");
  {
    std::ofstream in(input);
    for (const auto& text : texts) in << nlohmann::json(text).dump() << "\n";
  }
  const auto script = std::filesystem::path(QINFER_SOURCE_DIR) / "tests/testing/js_reference_encoder.cjs";
  const std::string command = "node '" + script.string() + "' '" + kAssets.string() + "' < '" + input.string() +
                              "' > '" + output.string() + "'";
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << "the JS reference encoder failed (needs node and tools/fetch-test-assets.sh): " << command;
    return {};
  }
  std::vector<std::vector<int32_t>> ids;
  for (const auto& value : read_jsonl(output)) ids.push_back(value.get<std::vector<int32_t>>());
  return ids;
}

}  // namespace qinfer::test
