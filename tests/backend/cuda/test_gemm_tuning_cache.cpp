// The on-disk cache of tuned cuBLASLt choices (no GPU needed): what is saved is read back for the same environment
// only, and a damaged, foreign or unwritable file never stops a start.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backend/cuda/gemm_tuning_cache.h"

namespace qinfer::cuda {
namespace {

namespace fs = std::filesystem;

GemmTuningEnvironment h200() {
  return {.gpu_name = "NVIDIA H200",
          .compute_capability = 90,
          .driver_version = 13000,
          .cublaslt_version = 130100,
          .workspace_bytes = 32u << 20};
}

GemmAlgoWords algo(uint64_t first) { return {first, 2, 3, 4, 5, 6, 7, 0xffffffffffffffffull}; }

class GemmTuningCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("qinfer-gemm-tuning-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(GemmTuningCacheTest, SavedEntriesReadBackForTheSameEnvironment) {
  const GemmShape qkv{.m = 8192, .n = 6144, .k = 2560, .y_fp32 = false};
  const GemmShape lm_head{.m = 256, .n = 151936, .k = 2560, .y_fp32 = true};
  {
    GemmTuningCache cache(dir_ / "nested", h200());
    EXPECT_TRUE(cache.enabled());
    EXPECT_EQ(cache.size(), 0u);
    cache.store(qkv, algo(1));
    cache.store(lm_head, algo(9));
    cache.save();
  }
  EXPECT_TRUE(fs::exists(dir_ / "nested" / GemmTuningCache::file_name(h200())));
  GemmTuningCache again(dir_ / "nested", h200());
  EXPECT_EQ(again.size(), 2u);
  EXPECT_EQ(again.find(qkv), algo(1));
  EXPECT_EQ(again.find(lm_head), algo(9));
  EXPECT_FALSE(again.find({.m = 8192, .n = 6144, .k = 2560, .y_fp32 = true}).has_value());
}

TEST_F(GemmTuningCacheTest, AnotherGpuDriverOrLibraryUsesAnotherFile) {
  GemmTuningEnvironment other_driver = h200(), other_library = h200(), other_gpu = h200();
  other_driver.driver_version = 13010;
  other_library.cublaslt_version = 130200;
  other_gpu.gpu_name = "NVIDIA GeForce RTX 4090 D";
  for (const GemmTuningEnvironment& other : {other_driver, other_library, other_gpu})
    EXPECT_NE(GemmTuningCache::file_name(other), GemmTuningCache::file_name(h200()));
  EXPECT_EQ(GemmTuningCache::file_name(h200()), GemmTuningCache::file_name(h200()));
}

TEST_F(GemmTuningCacheTest, AFileNamingAnotherEnvironmentIsIgnoredAndReplaced) {
  const GemmShape shape{.m = 16, .n = 2560, .k = 4096, .y_fp32 = false};
  GemmTuningEnvironment other = h200();
  other.driver_version = 12080;
  {
    GemmTuningCache cache(dir_, other);
    cache.store(shape, algo(5));
    cache.save();
  }
  // The other environment's file put where this environment's belongs (a copied cache directory, say).
  fs::rename(dir_ / GemmTuningCache::file_name(other), dir_ / GemmTuningCache::file_name(h200()));
  GemmTuningCache cache(dir_, h200());
  EXPECT_EQ(cache.size(), 0u);
  cache.store(shape, algo(6));
  cache.save();
  EXPECT_EQ(GemmTuningCache(dir_, h200()).find(shape), algo(6));
}

TEST_F(GemmTuningCacheTest, DamagedFilesAreIgnored) {
  fs::create_directories(dir_);
  for (const char* text :
       {"{not json", "[]", R"({"format_version": 1})", R"({"format_version": 2, "environment": {}, "entries": []})",
        R"({"format_version": 1, "environment": {"gpu_name": "NVIDIA H200", "compute_capability": 90,
                               "driver_version": 13000, "cublaslt_version": 130100, "workspace_bytes": 33554432},
                               "entries": [{"m": 16, "n": 1, "k": 1, "y_fp32": false, "algo": ["zz"]}]})"}) {
    std::ofstream(dir_ / GemmTuningCache::file_name(h200())) << text;
    GemmTuningCache cache(dir_, h200());
    EXPECT_EQ(cache.size(), 0u) << text;
  }
}

TEST_F(GemmTuningCacheTest, EmptyDirectoryIsNoCache) {
  GemmTuningCache cache("", h200());
  EXPECT_FALSE(cache.enabled());
  cache.store({.m = 16, .n = 8, .k = 8, .y_fp32 = false}, algo(1));
  cache.save();  // writes nothing anywhere
  EXPECT_FALSE(fs::exists(GemmTuningCache::file_name(h200())));
}

TEST_F(GemmTuningCacheTest, ErasedEntriesAreNotSaved) {
  const GemmShape kept{.m = 32, .n = 8, .k = 8, .y_fp32 = false}, refused{.m = 64, .n = 8, .k = 8, .y_fp32 = false};
  {
    GemmTuningCache cache(dir_, h200());
    cache.store(kept, algo(1));
    cache.store(refused, algo(2));
    cache.save();
  }
  {
    GemmTuningCache cache(dir_, h200());
    cache.erase(refused);
    cache.save();
  }
  GemmTuningCache reread(dir_, h200());
  EXPECT_TRUE(reread.find(kept).has_value());
  EXPECT_FALSE(reread.find(refused).has_value());
}

TEST_F(GemmTuningCacheTest, AnUnwritableDirectoryOnlyWarns) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "a-file") << "not a directory";
  GemmTuningCache cache(dir_ / "a-file" / "cache", h200());  // cannot be created, even by root
  cache.store({.m = 16, .n = 8, .k = 8, .y_fp32 = false}, algo(1));
  EXPECT_NO_THROW(cache.save());
  EXPECT_FALSE(fs::exists(dir_ / "a-file" / "cache"));
}

}  // namespace
}  // namespace qinfer::cuda
