// 64-bit hash of a byte string (XXH3, compiled inline so no libxxhash.so is needed on the GPU machine).
#pragma once

#include <cstdint>
#include <string_view>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace qinfer {

inline uint64_t hash_bytes(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

}  // namespace qinfer
