// Tuned cuBLASLt algorithm choices kept on disk, so that a start after the first skips the timing sweep of
// CublasLtGemm::tune() (about 0.9 s for the Qwen3-4B shapes on an H200). GPU-free: the algorithms are opaque words.
//
// A choice is valid only for the GPU, driver and cuBLASLt that timed it, and for the workspace it was timed with: the
// file's name is derived from those (GemmTuningEnvironment), and the file repeats them, so that a file written
// elsewhere is never used. Each entry is still checked by cuBLASLt (cublasLtMatmulAlgoCheck) before it is used.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace qinfer::cuda {

struct GemmTuningEnvironment {
  std::string gpu_name;           // cudaDeviceProp::name
  int compute_capability = 0;     // major * 10 + minor
  int driver_version = 0;         // cudaDriverGetVersion
  uint64_t cublaslt_version = 0;  // cublasLtGetVersion
  uint64_t workspace_bytes = 0;   // the most workspace an algorithm may use

  bool operator==(const GemmTuningEnvironment&) const = default;
};

// One GEMM shape: y [m, n] = x [m, k] · weight [n, k]ᵀ, m the bucket's upper end.
struct GemmShape {
  int m = 0, n = 0, k = 0;
  bool y_fp32 = false;

  auto operator<=>(const GemmShape&) const = default;
};

// The words of a cublasLtMatmulAlgo_t (its `data` member; the type is documented as an opaque 64-byte structure).
using GemmAlgoWords = std::array<uint64_t, 8>;

class GemmTuningCache {
 public:
  // The cache file for `environment` in `directory` (created on save). An empty directory: no cache (nothing is read
  // or written). A file that is missing starts an empty cache; one that cannot be parsed or names another environment
  // is ignored with a warning and replaced on save.
  GemmTuningCache(const std::filesystem::path& directory, GemmTuningEnvironment environment);

  bool enabled() const { return !path_.empty(); }
  const std::filesystem::path& path() const { return path_; }
  size_t size() const { return entries_.size(); }

  std::optional<GemmAlgoWords> find(const GemmShape& shape) const;
  void store(const GemmShape& shape, const GemmAlgoWords& algo);
  // Drops an entry that cuBLASLt refused, so that the next save does not keep it.
  void erase(const GemmShape& shape);

  // Writes the file if an entry changed since it was read (through a temporary file and a rename, so that a reader
  // never sees half a file). A failure is a warning: the cache only saves time.
  void save();

  // The file name for an environment: gemm-tuning-<64-bit hash of its fields, hex>.json.
  static std::string file_name(const GemmTuningEnvironment& environment);

 private:
  std::filesystem::path path_;
  GemmTuningEnvironment environment_;
  std::map<GemmShape, GemmAlgoWords> entries_;
  bool changed_ = false;
};

}  // namespace qinfer::cuda
