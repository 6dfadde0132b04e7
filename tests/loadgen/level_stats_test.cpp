// From request records to a level's numbers: TTFT, ITL, TPOT, E2E, throughput and errors on hand-made records.
#include "loadgen/level_stats.h"

#include <gtest/gtest.h>

#include "loadgen/bench_runner.h"

namespace qinfer::loadgen {
namespace {

RequestRecord ok_record(std::vector<double> arrivals, double latency, std::optional<long> usage_tokens) {
  RequestRecord r;
  r.text_arrivals_s = std::move(arrivals);
  r.latency_s = latency;
  r.usage_completion_tokens = usage_tokens;
  r.usage_prompt_tokens = 10;
  return r;
}

TEST(LevelStats, LatenciesThroughputAndErrors) {
  LoadRun run;
  run.duration_s = 2;
  // Request 0: first text at 0.1 s, then 0.2, 0.4; done at 0.5 s; the server said 5 output tokens.
  run.records.push_back(ok_record({0.1, 0.2, 0.4}, 0.5, 5));
  // Request 1: no usage: 2 text events count as 2 tokens; TPOT = (0.7 - 0.3) / 1.
  run.records.push_back(ok_record({0.3, 0.6}, 0.7, std::nullopt));
  RequestRecord failed;
  failed.error_kind = "http_503";
  failed.error_message = "overloaded";
  run.records.push_back(failed);
  std::vector<PromptSpec> prompts(3);
  prompts[1].prompt_tokens = 99;  // usage wins over the local count

  const LevelResult level = level_result(run, prompts, prompts.size());
  EXPECT_EQ(level.num_requests, 3);
  EXPECT_EQ(level.completed, 2);
  EXPECT_EQ(level.failed, 1);
  EXPECT_EQ(level.errors.at("http_503"), 1);
  EXPECT_EQ(level.error_samples.at("http_503"), "overloaded");
  EXPECT_EQ(level.total_output_tokens, 7);
  EXPECT_EQ(level.total_input_tokens, 20);
  EXPECT_DOUBLE_EQ(level.request_throughput, 1);
  EXPECT_DOUBLE_EQ(level.output_throughput, 3.5);
  EXPECT_DOUBLE_EQ(level.total_token_throughput, 13.5);
  ASSERT_TRUE(level.ttft_ms && level.itl_ms && level.tpot_ms && level.e2e_ms);
  EXPECT_DOUBLE_EQ(level.ttft_ms->mean, 200);
  EXPECT_EQ(level.itl_ms->count, 3u);  // 100, 200 and 300 ms
  EXPECT_NEAR(level.itl_ms->p50, 200, 1e-9);
  // TPOT: (500 - 100) / 4 = 100 ms and (700 - 300) / 1 = 400 ms.
  EXPECT_NEAR(level.tpot_ms->mean, 250, 1e-9);
  EXPECT_NEAR(level.e2e_ms->p50, 600, 1e-9);
}

// --long-questions 2: each document is asked twice; the second asks (prefix cached) are their own class.
TEST(LevelStats, ASecondQuestionAboutADocumentIsItsOwnClass) {
  LoadRun run;
  run.duration_s = 10;
  run.records.push_back(ok_record({0.1, 0.2}, 0.3, 2));  // short
  run.records.push_back(ok_record({3.0, 3.1}, 3.2, 2));  // document 1, first question: its prefill
  run.records.push_back(ok_record({0.2, 0.3}, 0.4, 2));  // document 1, second question: cached
  run.records.push_back(ok_record({4.0, 4.1}, 4.2, 2));  // document 2, first question
  run.records.push_back(ok_record({0.4, 0.5}, 0.6, 2));  // document 2, second question
  const LevelResult level = level_result(run, std::vector<PromptSpec>(5), 1, 2);
  ASSERT_EQ(level.classes.size(), 3u);
  const ClassResult& first = level.classes.at(kLongClass);
  const ClassResult& second = level.classes.at(kLongRepeatClass);
  EXPECT_EQ(level.classes.at(kShortClass).num_requests, 1);
  EXPECT_EQ(first.num_requests, 2);
  EXPECT_EQ(second.num_requests, 2);
  ASSERT_TRUE(first.ttft_ms && second.ttft_ms);
  EXPECT_NEAR(first.ttft_ms->p50, 3500, 1e-9);
  EXPECT_NEAR(second.ttft_ms->p50, 300, 1e-9);
}

TEST(LevelStats, MixedWorkloadHasPerClassNumbers) {
  LoadRun run;
  run.duration_s = 4;
  run.records.push_back(ok_record({0.1, 0.2}, 0.3, 2));       // short
  run.records.push_back(ok_record({0.2, 0.5}, 0.6, 2));       // short
  run.records.push_back(ok_record({2.0, 2.1, 2.2}, 2.3, 3));  // long: the first token after its prefill
  RequestRecord failed;
  failed.error_kind = "timeout";
  run.records.push_back(failed);  // long
  const LevelResult level = level_result(run, std::vector<PromptSpec>(4), 2);
  EXPECT_EQ(level.num_requests, 4);
  EXPECT_EQ(level.total_output_tokens, 7);
  ASSERT_EQ(level.classes.size(), 2u);
  const ClassResult& chats = level.classes.at(kShortClass);
  const ClassResult& documents = level.classes.at(kLongClass);
  EXPECT_EQ(chats.num_requests, 2);
  EXPECT_EQ(chats.completed, 2);
  EXPECT_EQ(documents.num_requests, 2);
  EXPECT_EQ(documents.completed, 1);
  EXPECT_EQ(documents.failed, 1);
  EXPECT_DOUBLE_EQ(chats.output_throughput, 1);  // 4 tokens in 4 s
  EXPECT_DOUBLE_EQ(documents.output_throughput, 0.75);
  ASSERT_TRUE(chats.ttft_ms && documents.ttft_ms && chats.itl_ms && documents.itl_ms);
  EXPECT_NEAR(chats.ttft_ms->p50, 150, 1e-9);
  EXPECT_NEAR(documents.ttft_ms->p50, 2000, 1e-9);
  EXPECT_EQ(chats.itl_ms->count, 2u);  // 100 and 300 ms
  EXPECT_NEAR(chats.itl_ms->p99, 298, 1e-9);
  EXPECT_EQ(documents.itl_ms->count, 2u);
  EXPECT_TRUE(level_result(run, std::vector<PromptSpec>(4), 4).classes.empty()) << "no long requests, no classes";
}

TEST(LevelStats, NothingCompletedGivesNullLatencies) {
  LoadRun run;
  run.duration_s = 1;
  RequestRecord failed;
  failed.error_kind = "connect";
  run.records.push_back(failed);
  const LevelResult level = level_result(run, std::vector<PromptSpec>(1), 1);
  EXPECT_FALSE(level.ttft_ms || level.tpot_ms || level.itl_ms || level.e2e_ms);
  EXPECT_EQ(level.output_throughput, 0);
}

TEST(PoissonArrivals, IncreasingWithTheRateAsMean) {
  const std::vector<double> arrivals = poisson_arrivals(20000, 4.0, 7);
  for (size_t i = 1; i < arrivals.size(); ++i) ASSERT_GT(arrivals[i], arrivals[i - 1]);
  // 20 000 exponential gaps of mean 0.25 s: the mean is within 2 % (about 3 standard errors).
  EXPECT_NEAR(arrivals.back() / 20000, 0.25, 0.25 * 0.02);
  EXPECT_EQ(poisson_arrivals(5, 4.0, 7), std::vector<double>(arrivals.begin(), arrivals.begin() + 5));
  EXPECT_NE(poisson_arrivals(5, 4.0, 8), std::vector<double>(arrivals.begin(), arrivals.begin() + 5));
}

TEST(ServerBaseUrl, StripsSlashesAndV1) {
  EXPECT_EQ(server_base_url("http://h:1/v1/"), "http://h:1");
  EXPECT_EQ(server_base_url("http://h:1/"), "http://h:1");
  EXPECT_EQ(server_base_url("http://h:1"), "http://h:1");
}

}  // namespace
}  // namespace qinfer::loadgen
