// Streaming SHA-256 (libgcrypt): the checksum the Hugging Face hub and ModelScope publish for large files.
#pragma once

#include <cstddef>
#include <string>

namespace qinfer {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t size);
  // Lower-case hex of the digest of everything updated so far; ends the hash (no update after it).
  std::string hex_digest();

 private:
  void* handle_ = nullptr;  // gcry_md_hd_t
};

}  // namespace qinfer
