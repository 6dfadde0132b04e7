#include "model/safetensors_writer.h"

#include "util/error.h"

namespace qinfer {

size_t TensorHeader::num_bytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& path, std::vector<TensorHeader> tensors,
                                     const nlohmann::json& metadata)
    : path_(path), tensors_(std::move(tensors)), out_(path, std::ios::binary) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorHeader& t : tensors_) {
    const uint64_t bytes = t.num_bytes();
    header[t.name] = {
        {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  const uint64_t length = text.size();
  char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  out_.write(length_bytes, 8);
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out_) throw Error(ErrorKind::kInternal, "cannot write " + path_.string());
}

void SafetensorsWriter::write(const std::string& name, std::span<const std::byte> bytes) {
  QINFER_CHECK(next_ < tensors_.size() && tensors_[next_].name == name, "tensors out of header order");
  QINFER_CHECK(bytes.size() == tensors_[next_].num_bytes(), "tensor size differs from its header");
  out_.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out_) throw Error(ErrorKind::kInternal, "cannot write " + path_.string());
  ++next_;
}

void SafetensorsWriter::finish() {
  QINFER_CHECK(next_ == tensors_.size(), "not every tensor was written");
  out_.close();
  if (!out_) throw Error(ErrorKind::kInternal, "cannot write " + path_.string());
}

}  // namespace qinfer
