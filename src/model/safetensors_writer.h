// Writes a safetensors file tensor by tensor (the header first, from every tensor's name, dtype and shape), so that
// large checkpoints stream through one tensor's buffer.
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "model/dtype.h"

namespace qinfer {

struct TensorHeader {
  std::string name;
  DType dtype = DType::kBF16;
  std::vector<int64_t> shape;
  size_t num_bytes() const;
};

class SafetensorsWriter {
 public:
  // Tensors are laid out in the order given and must be written in that order. Throws Error(kInternal) when the file
  // cannot be written.
  SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorHeader> tensors,
                    const nlohmann::json& metadata);
  // The next tensor's bytes; its name and size must match the header (a bug otherwise).
  void write(const std::string& name, std::span<const std::byte> bytes);
  // Checks that every tensor was written and closes the file.
  void finish();

 private:
  std::filesystem::path path_;
  std::vector<TensorHeader> tensors_;
  size_t next_ = 0;
  std::ofstream out_;
};

}  // namespace qinfer
