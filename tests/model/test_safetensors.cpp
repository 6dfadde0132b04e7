// safetensors parsing and checkpoint opening: valid files load as views; every malformed case is one clear error.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/safetensors.h"
#include "util/error.h"

namespace qinfer {
namespace {

std::vector<std::byte> make_file(const std::string& header, size_t data_bytes, std::optional<uint64_t> len = {}) {
  uint64_t n = len.value_or(header.size());
  std::vector<std::byte> out(8 + header.size() + data_bytes);
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < data_bytes; ++i) out[8 + header.size() + i] = static_cast<std::byte>(i * 31);
  return out;
}

std::string error_of(const std::vector<std::byte>& file) {
  try {
    parse_safetensors(file, "x.safetensors");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat) << e.what();
    return e.what();
  }
  return "";
}

TEST(Safetensors, ParsesValidHeaderWithMetadata) {
  std::string h = R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
                  R"("b":{"dtype":"F32","shape":[],"data_offsets":[12,16]}})";
  auto entries = parse_safetensors(make_file(h, 16), "x");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries.at("a").dtype, "BF16");
  EXPECT_EQ(entries.at("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(entries.at("b").begin, 12u);
}

TEST(Safetensors, RejectsHeaderLengthPastTheEnd) {
  auto f = make_file(R"({})", 0, 1000);
  EXPECT_NE(error_of(f).find("header length 1000 is past the end"), std::string::npos);
  EXPECT_NE(error_of(std::vector<std::byte>(5)).find("shorter than"), std::string::npos);
}

TEST(Safetensors, RejectsInvalidJson) {
  EXPECT_NE(error_of(make_file("{\"a\":", 0)).find("invalid JSON"), std::string::npos);
  EXPECT_NE(error_of(make_file("[1,2]", 0)).find("not a JSON object"), std::string::npos);
}

TEST(Safetensors, RejectsOffsetsOutOfRange) {
  auto e = error_of(make_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos);
  EXPECT_NE(e.find("past the data section"), std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8)).find("begin > end"),
            std::string::npos);
}

TEST(Safetensors, RejectsShapeTimesDtypeNotEqualToByteLength) {
  auto e = error_of(make_file(R"({"w":{"dtype":"BF16","shape":[3,3],"data_offsets":[0,16]}})", 16));
  EXPECT_NE(e.find("holds 16 bytes but shape"), std::string::npos);
  EXPECT_NE(e.find("needs 18"), std::string::npos);
}

TEST(Safetensors, RejectsOverlappingTensors) {
  auto e = error_of(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              12));
  EXPECT_NE(e.find("overlap"), std::string::npos);
}

TEST(Safetensors, RejectsUnknownDtypeAndBadFields) {
  EXPECT_NE(error_of(make_file(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 1)).find("unknown dtype"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)).find("shape"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"w":{"dtype":"F32","shape":[1]}})", 4)).find("data_offsets"), std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", 4))
                .find("too large"),
            std::string::npos);
}

class CheckpointDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qinfer-ckpt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::vector<std::byte>& bytes) {
    std::ofstream(dir_ / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  std::filesystem::path dir_;
};

TEST_F(CheckpointDir, OpensShardedCheckpointThroughIndex) {
  write("model-00001-of-00002.safetensors", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8));
  write("model-00002-of-00002.safetensors", make_file(R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", 4));
  std::ofstream(dir_ / "model.safetensors.index.json")
      << R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})";
  Checkpoint c = Checkpoint::open(dir_);
  EXPECT_TRUE(c.contains("a"));
  TensorView b = c.tensor("b");
  EXPECT_EQ(b.dtype, DType::kBF16);
  EXPECT_EQ(b.num_bytes, 4u);
  EXPECT_EQ(static_cast<int>(b.data[1]), 31);  // data section byte 1 of shard 2
  try {
    c.tensor("missing.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("missing.weight"), std::string::npos);
  }
}

TEST_F(CheckpointDir, MissingFilesAndUnsupportedDtypesAreNamed) {
  try {
    Checkpoint::open(dir_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
  write("model.safetensors", make_file(R"({"q":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8));
  Checkpoint c = Checkpoint::open(dir_);
  try {
    c.tensor("q");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("I64"), std::string::npos);
  }
}

TEST_F(CheckpointDir, TruncatedFileIsAFormatError) {
  auto bytes = make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 16);
  bytes.resize(bytes.size() - 5);
  write("model.safetensors", bytes);
  try {
    Checkpoint::open(dir_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace qinfer
