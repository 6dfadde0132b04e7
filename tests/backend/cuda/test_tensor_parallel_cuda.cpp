// Tensor parallelism on the GPU, run where one GPU exists: the same-device communicator's collectives against host
// sums, and N CUDA ranks on one GPU (--tensor-parallel-same-device) against one unsharded CUDA backend and the CPU
// reference, with the parity tests' bounds (test_cuda_backend.cpp). TP=1 rounds each layer's output to bf16 and adds
// one dot product; the ranks add N fp32 partial sums, so the two sit within bf16 rounding of each other, like the GPU
// and the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>
#include <thread>

#include "backend/cuda/same_device_communicator.h"
#include "backend/cuda/tensor_parallel_cuda_backend.h"
#include "backend/factory.h"
#include "gpu_test_util.h"
#include "model/test_model.h"
#include "testing/batch_test_util.h"
#include "util/error.h"
#include "util/half.h"

namespace qinfer {
namespace {

// Runs work(rank, stream) on `size` threads, each with its own stream on the current device.
void run_on_rank_threads(int size, const std::function<void(int, cudaStream_t)>& work) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  std::vector<std::jthread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      CUDA_CHECK(cudaSetDevice(device));
      cudaStream_t stream = nullptr;
      CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      work(r, stream);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      CUDA_CHECK(cudaStreamDestroy(stream));
    });
}

TEST(SameDeviceCommunicator, CollectivesMatchTheHostInRankOrder) {
  SKIP_WITHOUT_GPU();
  constexpr int kRanks = 3, kRounds = 40;
  constexpr size_t kCount = 5000;
  auto communicators = cuda::make_same_device_communicators(kRanks);
  // values[round][rank]: each rank's input of each round, made up front so that the threads only read them.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3, 3);
  std::vector<std::vector<std::vector<float>>> values(kRounds, std::vector<std::vector<float>>(kRanks));
  for (auto& round : values)
    for (auto& rank : round) {
      rank.resize(kCount);
      for (float& v : rank) v = dist(rng);
    }
  std::vector<std::vector<float>> reduced(kRanks), gathered(kRanks), broadcast(kRanks);
  std::vector<std::vector<uint16_t>> reduced_bf16(kRanks);
  struct {
    int sum = 0, sum_bf16 = 0, gather = 0, broadcast = 0;
  } mismatches;
  run_on_rank_threads(kRanks, [&](int r, cudaStream_t stream) {
    Communicator& comm = *communicators[static_cast<size_t>(r)];
    cuda::DeviceBuffer buffer(kCount * 4, "test"), bf16(kCount * 2, "test"), all(kRanks * kCount * 4, "test");
    for (int round = 0; round < kRounds; ++round) {
      const std::vector<float>& mine = values[static_cast<size_t>(round)][static_cast<size_t>(r)];
      std::vector<uint16_t> mine_bf16(kCount);
      for (size_t i = 0; i < kCount; ++i) mine_bf16[i] = float_to_bf16(mine[i]);
      CUDA_CHECK(cudaMemcpyAsync(buffer.data(), mine.data(), kCount * 4, cudaMemcpyHostToDevice, stream));
      CUDA_CHECK(cudaMemcpyAsync(bf16.data(), mine_bf16.data(), kCount * 2, cudaMemcpyHostToDevice, stream));
      comm.all_gather(buffer.data(), all.data(), kCount, CommDtype::kF32, stream);
      comm.all_reduce_sum(buffer.data(), kCount, CommDtype::kF32, stream);
      comm.all_reduce_sum(bf16.data(), kCount, CommDtype::kBf16, stream);
      reduced[static_cast<size_t>(r)].resize(kCount);
      reduced_bf16[static_cast<size_t>(r)].resize(kCount);
      gathered[static_cast<size_t>(r)].resize(kRanks * kCount);
      CUDA_CHECK(cudaMemcpyAsync(reduced[static_cast<size_t>(r)].data(), buffer.data(), kCount * 4,
                                 cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaMemcpyAsync(reduced_bf16[static_cast<size_t>(r)].data(), bf16.data(), kCount * 2,
                                 cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaMemcpyAsync(gathered[static_cast<size_t>(r)].data(), all.data(), kRanks * kCount * 4,
                                 cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaMemcpyAsync(buffer.data(), mine.data(), kCount * 4, cudaMemcpyHostToDevice, stream));
      comm.broadcast(buffer.data(), kCount, CommDtype::kF32, /*root=*/round % kRanks, stream);
      broadcast[static_cast<size_t>(r)].resize(kCount);
      CUDA_CHECK(cudaMemcpyAsync(broadcast[static_cast<size_t>(r)].data(), buffer.data(), kCount * 4,
                                 cudaMemcpyDeviceToHost, stream));
      CUDA_CHECK(cudaStreamSynchronize(stream));
      // Rank 0 checks the round once every rank has copied its results out; no early return (the others wait).
      comm.barrier();
      if (r == 0) {
        const auto& in = values[static_cast<size_t>(round)];
        const size_t root = static_cast<size_t>(round % kRanks);
        for (size_t i = 0; i < kCount; ++i) {
          float sum = in[0][i], sum_bf16 = bf16_to_float(float_to_bf16(in[0][i]));
          for (size_t q = 1; q < kRanks; ++q) {
            sum += in[q][i];
            sum_bf16 += bf16_to_float(float_to_bf16(in[q][i]));
          }
          for (size_t q = 0; q < kRanks; ++q) {
            mismatches.sum += reduced[q][i] != sum;
            mismatches.sum_bf16 += reduced_bf16[q][i] != float_to_bf16(sum_bf16);
            mismatches.broadcast += broadcast[q][i] != in[root][i];
            for (size_t from = 0; from < kRanks; ++from)
              mismatches.gather += gathered[q][from * kCount + i] != in[from][i];
          }
        }
      }
      comm.barrier();
    }
  });
  // Bit for bit: the sums are added in rank order on every rank, the copies are copies.
  EXPECT_EQ(mismatches.sum, 0);
  EXPECT_EQ(mismatches.sum_bf16, 0);
  EXPECT_EQ(mismatches.gather, 0);
  EXPECT_EQ(mismatches.broadcast, 0);
}

TEST(SameDeviceCommunicator, AbortWakesAWaitingRank) {
  SKIP_WITHOUT_GPU();
  auto group = std::make_shared<cuda::SameDeviceGroup>(2);
  cuda::SameDeviceCommunicator rank0(group, 0);
  cuda::DeviceBuffer buffer(64 * 4, "test");
  std::jthread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    group->abort("rank 1 failed");
  });
  // Rank 1 never comes: the abort ends the wait with an error instead of a hang.
  EXPECT_THROW(rank0.all_reduce_sum(buffer.data(), 64, CommDtype::kF32, nullptr), Error);
}

// tiny-untied with 4 KV heads (N = 4 divides them), and a vocabulary 4 does not divide when `padded_vocabulary`.
ModelConfig four_kv_head_config(bool padded_vocabulary) {
  ModelConfig c = test_model_preset("tiny-untied");
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.hidden_size = 128;
  if (padded_vocabulary) c.vocab_size = 151001;
  return c;
}

struct Comparison {
  double relative_error = 0;  // RMS of the difference over the RMS of the reference row
  bool argmax_agrees = true;  // where the reference's top-2 margin exceeds the clear margin
};

constexpr double kTolerance = 2e-2;  // the bf16 parity bound of test_cuda_backend.cpp
constexpr float kClearMargin = 0.05f;

Comparison compare_row(std::span<const float> got, std::span<const float> reference) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    if (!std::isfinite(got[i])) return {INFINITY, false};
    diff += (got[i] - reference[i]) * static_cast<double>(got[i] - reference[i]);
    norm += reference[i] * static_cast<double>(reference[i]);
  }
  std::vector<float> sorted(reference.begin(), reference.end());
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
  const auto argmax = [](std::span<const float> row) { return std::max_element(row.begin(), row.end()) - row.begin(); };
  return {std::sqrt(diff / norm), sorted[0] - sorted[1] <= kClearMargin || argmax(got) == argmax(reference)};
}

// The model split `size` ways on one GPU next to the unsharded CUDA backend and the CPU reference.
class SameDeviceRanks {
 public:
  SameDeviceRanks(const ModelConfig& config, int size)
      : model_(std::make_shared<LoadedModel>(make_dummy_model(config, 5, nullptr))) {
    BackendOptions o;
    o.max_model_len = 512;
    o.kv_cache_bytes = int64_t{32} << 20;
    o.max_num_seqs = 8;
    o.max_num_batched_tokens = 512;
    o.device = "cpu";
    cpu_ = create_backend(model_, o);
    o.device = "cuda";
    one_gpu_ = create_backend(model_, o);
    o.tensor_parallel_size = size;
    o.tensor_parallel_same_device = true;
    ranks_ = create_backend(model_, o);
  }

  const ModelConfig& config() const { return model_->config; }
  Backend& ranks() { return *ranks_; }

  // Runs the batch on all three and checks every sampled row of the ranks against both.
  void expect_same_logits(const Batch& batch, const std::string& what) {
    const std::vector<float> cpu = cpu_->forward_logits(batch), one = one_gpu_->forward_logits(batch),
                             split = ranks_->forward_logits(batch);
    ASSERT_EQ(split.size(), one.size()) << what;
    ASSERT_EQ(split.size(), cpu.size()) << what;
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    for (size_t r = 0; r < split.size() / vocab; ++r) {
      const auto row = [&](const std::vector<float>& logits) { return std::span(logits).subspan(r * vocab, vocab); };
      for (const auto& [reference, name] : {std::pair{&one, "one GPU"}, std::pair{&cpu, "CPU"}}) {
        const Comparison c = compare_row(row(split), row(*reference));
        EXPECT_LT(c.relative_error, kTolerance) << what << " row " << r << " against " << name;
        EXPECT_TRUE(c.argmax_agrees) << what << " row " << r << " against " << name;
      }
    }
  }

  // Greedy decode through step(): the ranks' tokens equal the unsharded GPU's argmax wherever its margin is clear,
  // and are fed back to both (the CPU is left behind).
  void expect_same_greedy_tokens(std::vector<int32_t> next, std::vector<int32_t> cached,
                                 const std::vector<std::vector<int32_t>>& tables, int steps) {
    const size_t vocab = static_cast<size_t>(config().vocab_size);
    for (int i = 0; i < steps; ++i) {
      Batch decode;
      decode.token_ids = next;
      for (size_t s = 0; s < next.size(); ++s) decode.sequences.push_back(sequence(1, cached[s], tables[s]));
      const std::vector<float> one = one_gpu_->forward_logits(decode);
      const std::vector<SampleResult> split = ranks_->step(decode);
      ASSERT_EQ(split.size(), next.size());
      for (size_t s = 0; s < next.size(); ++s) {
        const std::span<const float> row = std::span(one).subspan(s * vocab, vocab);
        std::vector<float> sorted(row.begin(), row.end());
        std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
        const auto argmax = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
        if (sorted[0] - sorted[1] > kClearMargin) {
          EXPECT_EQ(split[s].token, argmax) << "step " << i << " row " << s;
        }
        next[s] = split[s].token;
        ++cached[s];
      }
    }
  }

  BatchSequence sequence(int num_tokens, int num_cached, std::span<const int32_t> table) const {
    return testing::batch_sequence(num_tokens, num_cached, table, &greedy_);
  }

 private:
  std::shared_ptr<LoadedModel> model_;
  std::unique_ptr<Backend> cpu_, one_gpu_, ranks_;
  SamplingParams greedy_{.temperature = 0};
};

// Prefill in chunks, a mixed chunk + decode batch, a one-row and a two-row decode (the GEMV routes), then greedy
// decode through step().
void expect_ranks_match_one_gpu(const ModelConfig& config, int size) {
  SameDeviceRanks t(config, size);
  const auto a = testing::spread_prompt(70, 1), b = testing::spread_prompt(5, 2), c = testing::spread_prompt(40, 3);
  const std::vector<std::vector<int32_t>> tables = {{0, 1, 2, 3, 4, 5}, {6, 7}, {8, 9, 10, 11}};
  Batch first;
  first.token_ids = a;
  first.token_ids.resize(30);
  first.token_ids.insert(first.token_ids.end(), b.begin(), b.end());
  first.token_ids.insert(first.token_ids.end(), c.begin(), c.end());
  first.sequences = {t.sequence(30, 0, tables[0]), t.sequence(5, 0, tables[1]), t.sequence(40, 0, tables[2])};
  first.sequences[0].sample = false;
  t.expect_same_logits(first, "prefill");

  Batch second;
  second.token_ids.assign(a.begin() + 30, a.end());
  second.token_ids.push_back(17);
  second.sequences = {t.sequence(40, 30, tables[0]), t.sequence(1, 5, tables[1])};
  t.expect_same_logits(second, "chunk + decode");

  Batch one_row;
  one_row.token_ids = {4242};
  one_row.sequences = {t.sequence(1, 40, tables[2])};
  t.expect_same_logits(one_row, "decode of one");
  Batch two_rows;
  two_rows.token_ids = {300, 700};
  two_rows.sequences = {t.sequence(1, 70, tables[0]), t.sequence(1, 6, tables[1])};
  t.expect_same_logits(two_rows, "decode of two");

  t.expect_same_greedy_tokens({1, 2, 3}, {71, 7, 41}, tables, 8);
}

TEST(TensorParallelCudaBackend, TwoRanksOnOneGpuMatchOneGpu) {
  SKIP_WITHOUT_GPU();
  expect_ranks_match_one_gpu(test_model_preset("tiny-untied"), 2);
}

TEST(TensorParallelCudaBackend, TwoRanksOfATiedModelMatchOneGpu) {
  SKIP_WITHOUT_GPU();
  ModelConfig tied = test_model_preset("tiny-untied");
  tied.tie_word_embeddings = true;
  expect_ranks_match_one_gpu(tied, 2);
}

TEST(TensorParallelCudaBackend, FourRanksMatchOneGpu) {
  SKIP_WITHOUT_GPU();
  expect_ranks_match_one_gpu(four_kv_head_config(false), 4);
}

TEST(TensorParallelCudaBackend, FourRanksOfAPaddedVocabularyMatchOneGpu) {
  SKIP_WITHOUT_GPU();
  expect_ranks_match_one_gpu(four_kv_head_config(true), 4);
}

TEST(TensorParallelCudaBackend, EachRankHoldsItsOwnKvHeadsAndTheSameBlocks) {
  SKIP_WITHOUT_GPU();
  auto model = std::make_shared<LoadedModel>(make_dummy_model(four_kv_head_config(false), 5, nullptr));
  BackendOptions o;
  o.device = "cuda";
  o.max_model_len = 256;
  o.kv_cache_bytes = int64_t{16} << 20;
  o.max_num_seqs = 4;
  o.max_num_batched_tokens = 256;
  o.tensor_parallel_size = 2;
  o.tensor_parallel_same_device = true;
  TensorParallelCudaBackend backend(model, o);
  ASSERT_EQ(backend.tensor_parallel_size(), 2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(backend.rank(r).config().num_kv_heads, 2);
    EXPECT_EQ(backend.rank(r).config().num_heads, 4);
    EXPECT_EQ(backend.rank(r).kv_cache().num_blocks, backend.rank(0).kv_cache().num_blocks);
  }
  EXPECT_EQ(backend.kv_cache().num_blocks, backend.rank(0).kv_cache().num_blocks);
  EXPECT_EQ(backend.config().num_kv_heads, 4);
}

TEST(TensorParallelCudaBackend, MalformedBatchIsRefusedWithoutEndingTheGroup) {
  SKIP_WITHOUT_GPU();
  SameDeviceRanks t(test_model_preset("tiny-untied"), 2);
  const std::vector<int32_t> table = {0, 1};
  Batch bad;
  bad.token_ids = {1, 2};
  bad.sequences = {t.sequence(3, 0, table)};  // three tokens, two ids
  EXPECT_THROW(t.ranks().step(bad), Error);
  EXPECT_EQ(t.ranks().failure(), "");
  Batch good;
  good.token_ids = {1, 2, 3};
  good.sequences = {t.sequence(3, 0, table)};
  EXPECT_EQ(t.ranks().step(good).size(), 1u);
}

TEST(TensorParallelCudaBackend, TimesItsAllReduceAndKeepsStepping) {
  SKIP_WITHOUT_GPU();
  SameDeviceRanks t(test_model_preset("tiny-untied"), 2);
  // The factory's backend, as `bench latency` finds it.
  auto* ranks = dynamic_cast<TensorParallelCudaBackend*>(&t.ranks());
  ASSERT_NE(ranks, nullptr);
  const double seconds = ranks->time_all_reduce(4096, 5);
  EXPECT_GT(seconds, 0.0);
  EXPECT_LT(seconds, 1.0);
  const std::vector<int32_t> table = {0, 1};
  Batch batch;
  batch.token_ids = {1, 2, 3};
  batch.sequences = {t.sequence(3, 0, table)};
  EXPECT_EQ(t.ranks().step(batch).size(), 1u);
}

TEST(TensorParallelCudaBackend, MoreRanksThanGpusAreRefusedNamingBoth) {
  SKIP_WITHOUT_GPU();
  const int gpus = cuda_device_count();
  auto model = std::make_shared<LoadedModel>(make_dummy_model(four_kv_head_config(false), 5, nullptr));
  BackendOptions o;
  o.device = "cuda";
  o.tensor_parallel_size = 4;
  if (gpus >= 4) GTEST_SKIP() << gpus << " GPUs: 4 ranks fit";
  try {
    create_backend(model, o);
    FAIL() << "4 ranks on " << gpus << " GPUs were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("needs 4 GPUs; " + std::to_string(gpus) + " visible"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace qinfer
