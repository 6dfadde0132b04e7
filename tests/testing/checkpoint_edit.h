// Test helper: rewrites a generated checkpoint (its tensors or its config.json) to make malformed variants.
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "model/safetensors_writer.h"
#include "util/json_file.h"

namespace qinfer::test {

struct EditableTensor {
  TensorHeader header;
  std::vector<std::byte> bytes;
};

inline std::vector<EditableTensor> read_tensors(const std::filesystem::path& file) {
  std::vector<EditableTensor> tensors;
  SafetensorsFile f(file);
  for (const auto& [name, entry] : f.entries()) {
    TensorView v = f.view(name);
    tensors.push_back({{name, v.dtype, v.shape}, {v.data, v.data + v.num_bytes}});
  }
  return tensors;
}

inline void write_tensors(const std::filesystem::path& file, const std::vector<EditableTensor>& tensors) {
  std::vector<TensorHeader> headers;
  for (const auto& t : tensors) headers.push_back(t.header);
  SafetensorsWriter writer(file, headers, {{"format", "pt"}});
  for (const auto& t : tensors) writer.write(t.header.name, t.bytes);
  writer.finish();
}

// Rewrites DIR/model.safetensors through `edit`, which may change, remove or add tensors.
inline void edit_tensors(const std::filesystem::path& dir,
                         const std::function<void(std::vector<EditableTensor>&)>& edit) {
  auto tensors = read_tensors(dir / "model.safetensors");
  edit(tensors);
  write_tensors(dir / "model.safetensors", tensors);
}

inline EditableTensor& find_tensor(std::vector<EditableTensor>& tensors, const std::string& name) {
  for (auto& t : tensors)
    if (t.header.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

inline void erase_tensor(std::vector<EditableTensor>& tensors, const std::string& name) {
  std::erase_if(tensors, [&](const EditableTensor& t) { return t.header.name == name; });
}

// Rewrites DIR/config.json through `edit`.
inline void edit_config(const std::filesystem::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = read_json_file(dir / "config.json");
  edit(j);
  std::ofstream(dir / "config.json") << j.dump(2);
}

}  // namespace qinfer::test
