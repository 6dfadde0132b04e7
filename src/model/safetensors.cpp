#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "util/error.h"
#include "util/json_file.h"

namespace qinfer {

int64_t TensorView::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

// Element sizes of every dtype the safetensors format defines.
size_t safetensors_element_size(const std::string& dtype) {
  static const std::unordered_map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

uint64_t read_header_length(std::span<const std::byte> file_bytes) {
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(file_bytes[static_cast<size_t>(i)]);
  return len;
}

[[noreturn]] void format_error(const std::string& source, const std::string& what) {
  throw Error(ErrorKind::kFormat, source + ": " + what);
}

SafetensorsEntry parse_entry(const std::string& name, const nlohmann::json& j, uint64_t data_size,
                             const std::string& source) {
  const std::string where = "tensor '" + name + "'";
  if (!j.is_object()) format_error(source, where + " header entry is not an object");
  if (!j.contains("dtype") || !j["dtype"].is_string()) format_error(source, where + " has no string 'dtype'");
  if (!j.contains("shape") || !j["shape"].is_array()) format_error(source, where + " has no array 'shape'");
  if (!j.contains("data_offsets") || !j["data_offsets"].is_array() || j["data_offsets"].size() != 2)
    format_error(source, where + " has no two-element 'data_offsets'");
  SafetensorsEntry e;
  e.dtype = j["dtype"].get<std::string>();
  size_t element_size = safetensors_element_size(e.dtype);
  if (element_size == 0) format_error(source, where + " has unknown dtype '" + e.dtype + "'");
  uint64_t count = 1;
  for (const auto& d : j["shape"]) {
    if (!d.is_number_unsigned()) format_error(source, where + " has a shape entry that is not a non-negative integer");
    uint64_t v = d.get<uint64_t>();
    if (v != 0 && count > std::numeric_limits<uint64_t>::max() / 16 / v)
      format_error(source, where + " shape is too large");
    count *= v;
    e.shape.push_back(static_cast<int64_t>(v));
  }
  for (const auto& o : j["data_offsets"])
    if (!o.is_number_unsigned()) format_error(source, where + " data_offsets must be non-negative integers");
  e.begin = j["data_offsets"][0].get<uint64_t>();
  e.end = j["data_offsets"][1].get<uint64_t>();
  if (e.begin > e.end) format_error(source, where + " data_offsets begin > end");
  if (e.end > data_size)
    format_error(source, where + " data_offsets end " + std::to_string(e.end) + " is past the data section (" +
                             std::to_string(data_size) + " bytes)");
  uint64_t expected = count * element_size;
  if (e.end - e.begin != expected)
    format_error(source, where + " holds " + std::to_string(e.end - e.begin) + " bytes but shape × " + e.dtype +
                             " needs " + std::to_string(expected));
  return e;
}

}  // namespace

std::map<std::string, SafetensorsEntry> parse_safetensors(std::span<const std::byte> file_bytes,
                                                          const std::string& source) {
  if (file_bytes.size() < 8) format_error(source, "file is shorter than the 8-byte header length");
  uint64_t header_len = read_header_length(file_bytes);
  if (header_len > file_bytes.size() - 8)
    format_error(source, "header length " + std::to_string(header_len) + " is past the end of the file (" +
                             std::to_string(file_bytes.size()) + " bytes)");
  const char* header_begin = reinterpret_cast<const char*>(file_bytes.data() + 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_len);
  } catch (const nlohmann::json::exception& e) {
    format_error(source, std::string("invalid JSON header: ") + e.what());
  }
  if (!header.is_object()) format_error(source, "header is not a JSON object");
  uint64_t data_size = file_bytes.size() - 8 - header_len;
  std::map<std::string, SafetensorsEntry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") continue;
    entries.emplace(name, parse_entry(name, value, data_size, source));
  }
  // Overlap check over non-empty ranges, sorted by start.
  std::vector<std::pair<uint64_t, const std::string*>> starts;
  for (const auto& [name, e] : entries)
    if (e.end > e.begin) starts.emplace_back(e.begin, &name);
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) {
    const auto& prev = entries.at(*starts[i - 1].second);
    if (starts[i].first < prev.end)
      format_error(source, "tensors '" + *starts[i - 1].second + "' and '" + *starts[i].second + "' overlap");
  }
  return entries;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : file_(path) {
  entries_ = parse_safetensors(file_.bytes(), path.string());
  data_offset_ = 8 + read_header_length(file_.bytes());
}

TensorView SafetensorsFile::view(const std::string& name) const {
  const SafetensorsEntry& e = entries_.at(name);
  auto dtype = parse_safetensors_dtype(e.dtype);
  if (!dtype)
    throw Error(ErrorKind::kUnsupported,
                path().string() + ": tensor '" + name + "' has dtype " + e.dtype +
                    "; qinfer loads BF16, F16, F32, and F8_E4M3 / I32 inside quantized linears");
  TensorView v;
  v.name = name;
  v.dtype = *dtype;
  v.shape = e.shape;
  v.data = file_.bytes().data() + data_offset_ + e.begin;
  v.num_bytes = e.end - e.begin;
  v.file = path();
  return v;
}

Checkpoint Checkpoint::open(const std::filesystem::path& model_dir) {
  Checkpoint ckpt;
  ckpt.dir_ = model_dir;
  auto single = model_dir / "model.safetensors";
  auto index = model_dir / "model.safetensors.index.json";
  std::vector<std::filesystem::path> shards;
  if (std::filesystem::exists(index)) {
    nlohmann::json j = read_json_file(index);
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(ErrorKind::kFormat, index.string() + ": missing object field 'weight_map'");
    std::set<std::string> names;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string())
        throw Error(ErrorKind::kFormat, index.string() + ": weight_map entry '" + tensor + "' is not a string");
      std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        throw Error(ErrorKind::kFormat, index.string() + ": shard name '" + f + "' must be a plain file name");
      names.insert(f);
    }
    for (const auto& n : names) shards.push_back(model_dir / n);
  } else if (std::filesystem::exists(single)) {
    shards.push_back(single);
  } else {
    throw Error(ErrorKind::kNotFound,
                model_dir.string() + ": no model.safetensors or model.safetensors.index.json in the model directory");
  }
  for (const auto& shard : shards) {
    ckpt.files_.push_back(std::make_unique<SafetensorsFile>(shard));
    size_t idx = ckpt.files_.size() - 1;
    for (const auto& [name, e] : ckpt.files_.back()->entries()) {
      if (!ckpt.where_.emplace(name, idx).second)
        throw Error(ErrorKind::kFormat, shard.string() + ": tensor '" + name + "' also appears in " +
                                            ckpt.files_[ckpt.where_[name]]->path().string());
    }
  }
  return ckpt;
}

TensorView Checkpoint::tensor(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end())
    throw Error(ErrorKind::kNotFound, dir_.string() + ": checkpoint has no tensor '" + name + "'");
  return files_[it->second]->view(name);
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& [name, idx] : where_) names.push_back(name);
  return names;
}

size_t Checkpoint::total_bytes() const {
  size_t total = 0;
  for (const auto& f : files_) total += f->path().empty() ? 0 : std::filesystem::file_size(f->path());
  return total;
}

}  // namespace qinfer
