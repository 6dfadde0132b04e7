// Read-only memory map of a whole file. Move-only; unmaps on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace qinfer {

class MappedFile {
 public:
  // Throws Error(kNotFound) when the file is missing, Error(kFormat) when it cannot be mapped.
  explicit MappedFile(const std::filesystem::path& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace qinfer
