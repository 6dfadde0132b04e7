// Test-model generation (bit-identical everywhere), loading and binding errors, HF cache resolution.
#include <gtest/gtest.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdlib>
#include <fstream>

#include "model/model_path.h"
#include "model/test_model.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"

namespace qinfer {
namespace {

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qinfer-model-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

using TestModel = TempDir;

TEST_F(TestModel, GeneratedBytesArePinned) {
  // The hash pins the generator: the HF references in tests/data were made from checkpoints the same binary wrote on
  // another machine. A change here invalidates them.
  ThreadPool pool(2);
  write_test_model(dir_, test_model_preset("tiny"), 1, std::nullopt, &pool);
  MappedFile f(dir_ / "model.safetensors");
  EXPECT_EQ(XXH3_64bits(f.bytes().data(), f.bytes().size()), 0xc836acde82f7c1a1ull)
      << std::hex << XXH3_64bits(f.bytes().data(), f.bytes().size());
}

TEST_F(TestModel, DummyWeightsEqualTheWrittenCheckpoint) {
  ModelConfig config = test_model_preset("tiny-untied");
  write_test_model(dir_, config, 9, std::nullopt, nullptr);
  LoadedModel from_file = load_model(dir_);
  LoadedModel dummy = make_dummy_model(config, 9, nullptr);
  const TensorView& a = from_file.weights.layers[2].down_proj.dense();
  const TensorView& b = dummy.weights.layers[2].down_proj.dense();
  ASSERT_EQ(a.num_bytes, b.num_bytes);
  EXPECT_EQ(std::memcmp(a.data, b.data, a.num_bytes), 0);
  EXPECT_EQ(std::memcmp(from_file.weights.lm_head.data, dummy.weights.lm_head.data, a.num_bytes), 0);
}

TEST_F(TestModel, TiedModelsShareTheEmbeddingAsLmHead) {
  write_test_model(dir_, test_model_preset("tiny"), 3, std::nullopt, nullptr);
  LoadedModel m = load_model(dir_);
  EXPECT_EQ(m.weights.lm_head.data, m.weights.embed_tokens.data);
  EXPECT_EQ(m.weights.layers.size(), 4u);
  EXPECT_EQ(m.weights.layers[0].q_proj.dense().shape, (std::vector<int64_t>{512, 256}));
}

TEST(TestModelPresets, UnknownPresetIsRefused) { EXPECT_THROW(test_model_preset("70b"), Error); }

using Binding = TempDir;

TEST_F(Binding, WrongShapeNamesTensorExpectedAndActual) {
  ModelConfig config = test_model_preset("tiny");
  write_test_model(dir_, config, 1, std::nullopt, nullptr);
  // Claim a different intermediate size in config.json: the checkpoint no longer matches.
  config.intermediate_size = 1024;
  std::ofstream(dir_ / "config.json") << model_config_to_json(config).dump();
  try {
    load_model(dir_);
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[768, 256]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected [1024, 256]"), std::string::npos) << msg;
  }
}

TEST_F(Binding, MissingTensorIsNamed) {
  ModelConfig config = test_model_preset("tiny");
  write_test_model(dir_, config, 1, std::nullopt, nullptr);
  config.tie_word_embeddings = false;  // now lm_head.weight is required but absent
  std::ofstream(dir_ / "config.json") << model_config_to_json(config).dump();
  try {
    load_model(dir_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("lm_head.weight"), std::string::npos);
  }
}

TEST_F(Binding, MissingDirectoryAndConfig) {
  EXPECT_THROW(load_model(dir_ / "nope"), Error);
  try {
    load_model(dir_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos);
  }
}

using HfCache = TempDir;

TEST_F(HfCache, ResolvesRepoIdThroughRefsMain) {
  auto repo = dir_ / "hub" / "models--Qwen--Qwen3-4B-Instruct-2507";
  std::filesystem::create_directories(repo / "snapshots" / "abc123");
  std::filesystem::create_directories(repo / "snapshots" / "old456");
  std::filesystem::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << "abc123";
  ::setenv("HF_HUB_CACHE", (dir_ / "hub").c_str(), 1);
  EXPECT_EQ(resolve_model_dir("Qwen/Qwen3-4B-Instruct-2507"), repo / "snapshots" / "abc123");
  ::unsetenv("HF_HUB_CACHE");
  ::setenv("HF_HOME", dir_.c_str(), 1);
  EXPECT_EQ(resolve_model_dir("Qwen/Qwen3-4B-Instruct-2507"), repo / "snapshots" / "abc123");
  try {
    resolve_model_dir("Qwen/Qwen3-8B");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("models--Qwen--Qwen3-8B"), std::string::npos);
  }
  ::unsetenv("HF_HOME");
  EXPECT_EQ(resolve_model_dir(dir_.string()), dir_);
}

}  // namespace
}  // namespace qinfer
