// libFuzzer target: any byte string given to the safetensors parser is either accepted or refused with
// qinfer::Error; never a crash, hang or out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <span>

#include "model/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto entries = qinfer::parse_safetensors(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz");
    for (const auto& [name, e] : entries)
      if (e.end < e.begin || e.end > size) __builtin_trap();
  } catch (const qinfer::Error&) {
  }
  return 0;
}
