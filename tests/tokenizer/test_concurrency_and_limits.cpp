// encode() is const and thread-safe (shared word cache): threads encoding at once must get HF's ids; and very long
// or degenerate inputs (one huge word, long whitespace runs, many emoji) neither crash nor lose text.
#include <gtest/gtest.h>

#include <thread>

#include "testing/tokenizer_assets.h"

namespace qinfer {
namespace {

TEST(TokenizerConcurrency, ThreadsEncodingTogetherMatchTheHfReference) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  const auto docs = test::read_jsonl(test::kTokenizerData / "corpus/english.jsonl");
  std::vector<uint64_t> expected_hashes;
  std::ifstream expected(test::kTokenizerData / "expected/english.tsv");
  std::string count, hash, rest;
  while (expected >> count >> hash && std::getline(expected, rest)) expected_hashes.push_back(std::stoull(hash, 0, 16));
  ASSERT_EQ(expected_hashes.size(), docs.size());
  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < docs.size(); ++k) {
        const size_t i = (k * (t + 1) + t) % docs.size();  // different orders so threads race on the cache
        if (test::ids_hash(tokenizer->encode(docs[i].get<std::string>())) != expected_hashes[i]) ++mismatches[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(TokenizerLimits, DegenerateInputsRoundTrip) {
  std::optional<Tokenizer> tokenizer;
  ASSERT_NO_FATAL_FAILURE(test::load_qwen3(tokenizer));
  std::string emoji;
  for (int i = 0; i < 20000; ++i) emoji += "👨‍👩‍👧";
  const std::string inputs[] = {std::string(1 << 20, 'a'), std::string(200000, ' ') + "x",
                                std::string(100000, '\n') + std::string(100000, ' '), emoji, std::string(300000, '9')};
  for (const std::string& input : inputs) {
    const auto ids = tokenizer->encode(input);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tokenizer->decode(ids, false), input);
  }
}

}  // namespace
}  // namespace qinfer
