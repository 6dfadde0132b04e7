// How K/V vectors are stored in the paged cache, in a header of its own so that CUDA sources (C++17) and GPU-free
// planners can name it without the backend interface.
#pragma once

namespace qinfer {

// kBf16 is the model dtype (the CPU reference keeps fp32 then); kFp8E4m3 is E4M3 bytes with one fp32 scale per
// (token, KV head) vector, in the layout and quantisation of util/fp8.h (docs/ARCHITECTURE.md, "The fp8 KV cache").
enum class KvCacheDtype { kBf16, kFp8E4m3 };

}  // namespace qinfer
