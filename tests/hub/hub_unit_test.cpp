// hub/ and model/model_path.h without a network: which files a download takes, where the caches put them, how the
// cached snapshot of a revision is found, ETag handling and the progress line's numbers.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "hub/download_progress.h"
#include "hub/hf_api.h"
#include "hub/hub_options.h"
#include "hub/snapshot_download.h"
#include "model/model_path.h"
#include "util/error.h"

namespace qinfer {
namespace {

namespace fs = std::filesystem;

// Points HF_HUB_CACHE and MODELSCOPE_CACHE at a fresh folder for one test.
class CacheDirs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("qinfer-hub-test-" + std::to_string(getpid()));
    fs::remove_all(root_);
    setenv("HF_HUB_CACHE", (root_ / "hf").c_str(), 1);
    setenv("MODELSCOPE_CACHE", (root_ / "ms").c_str(), 1);
  }
  void TearDown() override {
    unsetenv("HF_HUB_CACHE");
    unsetenv("MODELSCOPE_CACHE");
    fs::remove_all(root_);
  }
  static void write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  fs::path root_;
};

TEST(HubFiles, DefaultSelectionIsWhatAQwen3ModelNeeds) {
  for (const char* wanted :
       {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "merges.txt", "vocab.json",
        "chat_template.jinja", "model.safetensors", "model-00001-of-00002.safetensors", "model.safetensors.index.json"})
    EXPECT_TRUE(hub::wanted_file(wanted, {})) << wanted;
  for (const char* unwanted :
       {"README.md", ".gitattributes", "pytorch_model.bin", "LICENSE", "original/x.safetensors", "onnx/model.onnx"})
    EXPECT_FALSE(hub::wanted_file(unwanted, {})) << unwanted;
  EXPECT_TRUE(hub::wanted_file("original/x.safetensors", {"*.safetensors"})) << "user globs cross '/' as in hf";
  EXPECT_FALSE(hub::wanted_file("config.json", {"*.safetensors"}));
}

TEST(HubFiles, EtagsAndLinks) {
  EXPECT_EQ(hub::normalize_etag("W/\"abc\""), "abc");
  EXPECT_EQ(hub::normalize_etag("\"abc\""), "abc");
  EXPECT_EQ(hub::normalize_etag("abc"), "abc");
  EXPECT_EQ(hub::blob_link_target("config.json", "e1"), fs::path("../../blobs/e1"));
  EXPECT_EQ(hub::blob_link_target("sub/dir/x.json", "e2"), fs::path("../../../../blobs/e2"));
  EXPECT_EQ(hub::url_origin("https://hf-mirror.com/api/models/x"), "https://hf-mirror.com");
  EXPECT_EQ(hub::url_origin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
}

TEST(HubFiles, ProgressNumbers) {
  EXPECT_EQ(hub::format_bytes(512), "512 B");
  EXPECT_EQ(hub::format_bytes(1.5 * 1024 * 1024 * 1024), "1.50 GiB");
  EXPECT_EQ(hub::format_duration(42), "42s");
  EXPECT_EQ(hub::format_duration(185), "3m05s");
  EXPECT_EQ(hub::format_duration(3720), "1h02m");
  EXPECT_EQ(hub::format_duration(-1), "--");
}

TEST_F(CacheDirs, RepoDirsFollowEachHubsLayout) {
  EXPECT_EQ(hf_repo_dir("Qwen/Qwen3-4B"), root_ / "hf" / "models--Qwen--Qwen3-4B");
  EXPECT_EQ(modelscope_repo_dir("Qwen/Qwen3-0.6B"), root_ / "ms" / "models" / "Qwen" / "Qwen3-0___6B");
  EXPECT_TRUE(looks_like_repo_id("Qwen/Qwen3-4B"));
  EXPECT_FALSE(looks_like_repo_id("Qwen"));
  EXPECT_FALSE(looks_like_repo_id("a/b/c"));
  EXPECT_FALSE(looks_like_repo_id("../x"));
  EXPECT_TRUE(is_commit_hash(std::string(40, 'a')));
  EXPECT_FALSE(is_commit_hash("main"));
}

TEST_F(CacheDirs, FindsTheSnapshotOfARevision) {
  const fs::path repo = hf_repo_dir("org/m");
  const std::string main_commit(40, '1');
  const std::string tag_commit(40, '2');
  EXPECT_FALSE(find_cached_snapshot("org/m", "", ModelSource::kHuggingFace));
  write(repo / "snapshots" / main_commit / "config.json", "{}");
  EXPECT_EQ(*find_cached_snapshot("org/m", "", ModelSource::kHuggingFace), repo / "snapshots" / main_commit)
      << "the only snapshot stands for main when refs/ is missing";
  write(repo / "snapshots" / tag_commit / "config.json", "{}");
  EXPECT_FALSE(find_cached_snapshot("org/m", "", ModelSource::kHuggingFace)) << "two snapshots, no refs/main";
  write(repo / "refs" / "main", main_commit);
  write(repo / "refs" / "v2", tag_commit + "\n");
  EXPECT_EQ(*find_cached_snapshot("org/m", "main", ModelSource::kHuggingFace), repo / "snapshots" / main_commit);
  EXPECT_EQ(*find_cached_snapshot("org/m", "v2", ModelSource::kHuggingFace), repo / "snapshots" / tag_commit);
  EXPECT_EQ(*find_cached_snapshot("org/m", tag_commit, ModelSource::kHuggingFace), repo / "snapshots" / tag_commit);
  EXPECT_FALSE(find_cached_snapshot("org/m", "v3", ModelSource::kHuggingFace));
  EXPECT_FALSE(find_cached_snapshot("org/m", std::string(40, '3'), ModelSource::kHuggingFace));
  try {
    resolve_model_dir("org/other");
    FAIL() << "expected not found";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("qinfer download org/other"), std::string::npos) << e.what();
  }

  const fs::path ms = modelscope_repo_dir("org/m.1");
  EXPECT_FALSE(find_cached_snapshot("org/m.1", "", ModelSource::kModelScope));
  write(ms / "config.json", "{}");
  write(ms / ".mv", "Revision:v1.0,CreatedAt:1700000000");
  EXPECT_EQ(*find_cached_snapshot("org/m.1", "", ModelSource::kModelScope), ms);
  EXPECT_EQ(*find_cached_snapshot("org/m.1", "v1.0", ModelSource::kModelScope), ms);
  EXPECT_FALSE(find_cached_snapshot("org/m.1", "v1", ModelSource::kModelScope));
}

TEST_F(CacheDirs, ASnapshotIsCompleteWithConfigTokenizerAndEveryShard) {
  const fs::path dir = root_ / "model";
  write(dir / "config.json", "{}");
  EXPECT_FALSE(snapshot_is_complete(dir));
  write(dir / "tokenizer.json", "{}");
  EXPECT_FALSE(snapshot_is_complete(dir));
  write(dir / "model.safetensors.index.json", R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  write(dir / "s1.safetensors", "");
  EXPECT_FALSE(snapshot_is_complete(dir)) << "a shard is missing";
  write(dir / "s2.safetensors", "");
  EXPECT_TRUE(snapshot_is_complete(dir));
  fs::remove(dir / "model.safetensors.index.json");
  write(dir / "model.safetensors", "");
  EXPECT_TRUE(snapshot_is_complete(dir));
}

TEST_F(CacheDirs, OfflineNeverDownloads) {
  hub::HubOptions options = hub::hub_options_from_env(ModelSource::kHuggingFace);
  options.offline = true;
  options.endpoint = "http://127.0.0.1:9";
  EXPECT_THROW(hub::download_model(options, "org/m", ""), Error);
  const std::string commit(40, '4');
  write(hf_repo_dir("org/m") / "snapshots" / commit / "config.json", "{}");
  EXPECT_EQ(hub::download_model(options, "org/m", ""), hf_repo_dir("org/m") / "snapshots" / commit);
}

}  // namespace
}  // namespace qinfer
