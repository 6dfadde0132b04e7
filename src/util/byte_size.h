// Byte counts as people write and read them: "4GiB", "512M", "2.5e9" in; "8.04 GiB" out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qinfer {

// A non-negative number with an optional unit: none or B (bytes); k, m, g, t (powers of 1000, vLLM's lowercase);
// K, M, G, T, KiB, MiB, GiB, TiB (powers of 1024, vLLM's uppercase); kB, MB, GB, TB (powers of 1000).
// nullopt for anything else or a value beyond int64.
std::optional<int64_t> parse_byte_size(std::string_view text);

// "512 B", "3.0 KiB", "8.04 GiB": three significant digits in the largest binary unit below the value.
std::string format_bytes(int64_t bytes);

}  // namespace qinfer
