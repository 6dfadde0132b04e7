// Where the chat-template test data lives and how the tests read it.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace qinfer::test {

inline const std::filesystem::path kChatTemplateDataDir =
    std::filesystem::path(QINFER_SOURCE_DIR) / "tests/data/chat_templates";

inline std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Key order matters (template contexts are rendered in insertion order), hence ordered_json.
inline nlohmann::ordered_json read_ordered_json(const std::filesystem::path& path) {
  return nlohmann::ordered_json::parse(read_text_file(path));
}

}  // namespace qinfer::test
