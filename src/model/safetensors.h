// safetensors files: header parsing (fuzzed), memory-mapped tensor views, sharded checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/dtype.h"
#include "util/mapped_file.h"

namespace qinfer {

// A tensor inside a mapped file. `data` points into the mapping; the view does not own it.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;
  size_t num_bytes = 0;
  std::filesystem::path file;  // where it lives, for error messages

  int64_t num_elements() const;
  std::string shape_string() const;  // "[2560, 4096]"
};

// Header entry: byte range relative to the start of the data section.
struct SafetensorsEntry {
  std::string dtype;  // as spelled in the header: BF16, F32, I64, F8_E4M3, ...
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Parses and validates a whole safetensors file image: 8-byte little-endian header length, JSON header, data
// section. Checks dtype names, shape × dtype size == byte length, ranges inside the data section and not overlapping.
// `source` names the file in error messages. Throws Error(kFormat). Dtypes qinfer cannot compute with are accepted
// here and refused by name when such a tensor is viewed.
std::map<std::string, SafetensorsEntry> parse_safetensors(std::span<const std::byte> file_bytes,
                                                          const std::string& source);

// One mapped safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  const std::filesystem::path& path() const { return file_.path(); }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  // Throws Error(kUnsupported) for dtypes other than F32/F16/BF16/F8_E4M3/I32. `name` must be in entries().
  TensorView view(const std::string& name) const;

 private:
  MappedFile file_;
  std::map<std::string, SafetensorsEntry> entries_;
  size_t data_offset_ = 0;
};

// All tensors of a checkpoint: `model.safetensors`, or `model.safetensors.index.json` and its shards.
class Checkpoint {
 public:
  // Throws Error(kNotFound) when the directory has neither file.
  static Checkpoint open(const std::filesystem::path& model_dir);

  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  // Throws Error(kNotFound) naming the tensor and the checkpoint.
  TensorView tensor(const std::string& name) const;
  std::vector<std::string> tensor_names() const;  // for errors that list what a checkpoint holds
  size_t total_bytes() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
};

}  // namespace qinfer
