// The engine over the fake backend: streams, usage, n samples, stop strings, aborts, deadlines, refusals, failures.
// Expected tokens come from fake_reference_generate, which computes them without any cache or batching.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <random>
#include <thread>

#include "engine_test_util.h"
#include "testing/fake_backend.h"
#include "util/error.h"

namespace qinfer::testing {
namespace {

std::vector<int32_t> reference(const GenerationRequest& request, const FakeModelSpec& spec, uint64_t seed = 0) {
  SamplingParams params = request.sampling;
  params.seed = seed;
  FakeGeneration generation{
      request.max_tokens.value_or(spec.max_model_len - static_cast<int32_t>(request.prompt.size())), request.ignore_eos,
      request.stop_token_ids};
  return fake_reference_generate(request.prompt, params, generation, spec);
}

TEST(Engine, StreamsTheReferenceTokensWithUsage) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  Engine engine(backend, engine_options());
  std::vector<GenerationRequest> requests;
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 10; ++i) {
    requests.push_back(greedy_request(tokens_from(1 + 7 * i, 5 + 3 * i), 10 + i));
    handles.push_back(engine.submit(requests.back()));
  }
  run_until_idle(engine);
  EXPECT_GT(backend.max_batch_sequences(), 1);
  for (size_t i = 0; i < requests.size(); ++i) {
    Collected got = collect(*handles[i].stream, 1);
    std::vector<int32_t> expected = reference(requests[i], spec);
    EXPECT_EQ(got.tokens[0], expected) << "request " << i;
    EXPECT_EQ(got.finish[0], expected.size() == static_cast<size_t>(*requests[i].max_tokens) && expected.back() != 0
                                 ? FinishReason::kLength
                                 : FinishReason::kStop);
    Usage usage = handles[i].stream->usage();
    EXPECT_EQ(usage.prompt_tokens, static_cast<int32_t>(requests[i].prompt.size()));
    EXPECT_EQ(usage.completion_tokens, static_cast<int32_t>(expected.size()));
    EXPECT_TRUE(handles[i].stream->done());
  }
  EXPECT_EQ(engine.block_manager().num_free_blocks(), spec.num_blocks);
  EXPECT_EQ(engine.stats().finished_requests, requests.size());
}

TEST(Engine, StreamsRecordWhenTheRequestWasFirstScheduled) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  EngineOptions options = engine_options();
  options.max_num_seqs = 1;  // the second request queues behind the first
  Engine engine(backend, options);
  RequestHandle first = engine.submit(greedy_request(tokens_from(1, 5), 4));
  RequestHandle second = engine.submit(greedy_request(tokens_from(50, 5), 4));
  EXPECT_FALSE(first.stream->first_scheduled().has_value());
  engine.step();
  ASSERT_TRUE(first.stream->first_scheduled().has_value());
  EXPECT_FALSE(second.stream->first_scheduled().has_value());
  const auto first_time = *first.stream->first_scheduled();
  engine.step();  // a decode step of the first request keeps its first time
  EXPECT_EQ(*first.stream->first_scheduled(), first_time);
  run_until_idle(engine);
  ASSERT_TRUE(second.stream->first_scheduled().has_value());
  EXPECT_GT(*second.stream->first_scheduled(), first_time);
}

TEST(Engine, ThreadedLoopServesConcurrentSubmitters) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  Engine engine(backend, engine_options());
  engine.start();
  std::vector<std::thread> clients;
  std::vector<int> mismatches(4, 0);
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int r = 0; r < 8; ++r) {
        GenerationRequest request = greedy_request(tokens_from(1 + c * 50 + r, 6 + r), 12);
        request.sampling.temperature = 0.7f;
        request.seed = static_cast<uint64_t>(c * 100 + r);
        RequestHandle handle = engine.submit(request);
        Collected got = collect(*handle.stream, 1);
        if (got.tokens[0] != reference(request, spec, *request.seed)) ++mismatches[static_cast<size_t>(c)];
      }
    });
  }
  for (std::thread& client : clients) client.join();
  engine.stop();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
  EXPECT_EQ(engine.stats().num_free_blocks, spec.num_blocks);
}

TEST(Engine, ConcurrentSubmitsAndAbortsLeaveNoBlocksBehind) {
  FakeModelSpec spec = fake_model();
  spec.num_blocks = 40;  // tight: preemption happens under load
  FakeBackend backend(spec);
  EngineOptions options = engine_options(/*with_text=*/true);
  Engine engine(backend, options);
  engine.start();
  std::vector<std::thread> clients;
  std::vector<int> bad(4, 0);
  std::atomic<int> refused = 0, aborted = 0;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(static_cast<uint32_t>(c));
      std::vector<std::pair<GenerationRequest, RequestHandle>> mine;
      for (int r = 0; r < 60; ++r) {
        GenerationRequest request = greedy_request(tokens_from(1 + static_cast<int32_t>(rng() % 40), 4 + rng() % 30),
                                                   1 + static_cast<int32_t>(rng() % 40));
        request.n = 1 + static_cast<int32_t>(rng() % 3);
        request.sampling.temperature = 0.9f;
        request.seed = rng();
        if (rng() % 4 == 0) request.stop = {"qq"};
        try {
          mine.emplace_back(request, engine.submit(request));
        } catch (const Error&) {  // n samples that cannot fit the 40 blocks together
          ++refused;
          continue;
        }
        if (rng() % 3 == 0) engine.abort(mine[rng() % mine.size()].second.id);
      }
      for (auto& [request, handle] : mine) {
        Collected got = collect(*handle.stream, request.n);
        for (int32_t i = 0; i < request.n; ++i) {
          size_t index = static_cast<size_t>(i);
          if (got.finish[index] == FinishReason::kNone) ++bad[static_cast<size_t>(c)];
          if (got.finish[index] == FinishReason::kAbort) ++aborted;
          // Unless aborted or stopped by the string, each sample is its seeded reference.
          if (got.finish[index] == FinishReason::kLength || got.finish[index] == FinishReason::kStop) {
            std::vector<int32_t> expected = reference(request, spec, *request.seed + static_cast<uint64_t>(i));
            if (got.finish[index] == FinishReason::kStop && !request.stop.empty())
              expected.resize(std::min(expected.size(), got.tokens[index].size()));
            if (got.tokens[index] != expected) ++bad[static_cast<size_t>(c)];
          }
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  engine.stop();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
  EngineStats stats = engine.stats();
  EXPECT_EQ(stats.num_free_blocks, spec.num_blocks);
  EXPECT_EQ(stats.num_running + stats.num_waiting, 0);
  EXPECT_EQ(stats.finished_requests + static_cast<uint64_t>(refused.load()), 240u);
  EXPECT_GT(aborted.load(), 0);
  EXPECT_GT(stats.scheduler.preemptions, 0u);
}

TEST(Engine, AbortFreesBlocksWithinOneStep) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  Engine engine(backend, engine_options());
  GenerationRequest request = greedy_request(tokens_from(1, 40), 80);
  request.ignore_eos = true;
  RequestHandle handle = engine.submit(request);
  for (int i = 0; i < 4; ++i) engine.step();
  EXPECT_LT(engine.block_manager().num_free_blocks(), spec.num_blocks);
  engine.abort(handle.id);
  engine.step();
  EXPECT_EQ(engine.block_manager().num_free_blocks(), spec.num_blocks);
  EXPECT_FALSE(engine.has_work());
  Collected got = collect(*handle.stream, 1);
  EXPECT_EQ(got.finish[0], FinishReason::kAbort);
  EXPECT_EQ(handle.stream->usage().completion_tokens, static_cast<int32_t>(got.tokens[0].size()));
  engine.abort(handle.id);  // unknown by now: ignored
  engine.abort(12345);
  engine.step();
}

TEST(Engine, RefusingUnscheduledEndsTheQueuedAndLaterRequestsButNotTheRunningOne) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  EngineOptions options = engine_options();
  options.max_num_seqs = 1;  // the second request queues behind the first
  Engine engine(backend, options);
  GenerationRequest running_request = greedy_request(tokens_from(1, 5), 12);
  running_request.ignore_eos = true;
  RequestHandle running = engine.submit(running_request);
  RequestHandle queued = engine.submit(greedy_request(tokens_from(50, 5), 4));
  engine.step();
  ASSERT_TRUE(running.stream->first_scheduled().has_value());
  ASSERT_FALSE(queued.stream->first_scheduled().has_value());
  engine.refuse_unscheduled("draining");
  RequestHandle later = engine.submit(greedy_request(tokens_from(90, 5), 4));
  engine.step();
  for (RequestHandle* refused : {&queued, &later}) {
    Collected got = collect(*refused->stream, 1);
    EXPECT_TRUE(refused->stream->done());
    EXPECT_TRUE(got.tokens[0].empty());
    EXPECT_EQ(got.finish[0], FinishReason::kAbort);
    EXPECT_EQ(got.error, "draining");
    EXPECT_FALSE(refused->stream->first_scheduled().has_value());
  }
  run_until_idle(engine);
  Collected got = collect(*running.stream, 1);
  EXPECT_EQ(got.tokens[0], reference(running_request, spec));
  EXPECT_EQ(got.finish[0], FinishReason::kLength);
  EXPECT_EQ(engine.block_manager().num_free_blocks(), spec.num_blocks);
}

TEST(Engine, ParallelSamplesShareThePromptAndFollowTheirSeeds) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  EngineOptions options = engine_options();
  options.enable_prefix_caching = false;  // sharing must come from the fork, not the cache
  Engine engine(backend, options);
  GenerationRequest request = greedy_request(tokens_from(1, 26), 8);  // 6 full blocks + 2 tokens
  request.sampling.temperature = 1.0f;
  request.seed = 42;
  request.n = 4;
  request.ignore_eos = true;
  request.logprobs = true;
  request.sampling.num_top_logprobs = 2;
  RequestHandle handle = engine.submit(request);
  engine.step();  // sample 0's prompt
  engine.step();  // samples 1-3 map its 6 full blocks and compute their last 2 prompt tokens
  // Sample 0: 7 blocks; each other sample: 1 own block.
  EXPECT_EQ(engine.block_manager().num_free_blocks(), spec.num_blocks - 7 - 3);
  run_until_idle(engine);
  Collected got = collect(*handle.stream, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got.tokens[static_cast<size_t>(i)], reference(request, spec, 42 + static_cast<uint64_t>(i)));
    ASSERT_EQ(got.logprobs[static_cast<size_t>(i)].size(), 8u);
    EXPECT_EQ(got.logprobs[static_cast<size_t>(i)][0].top.size(), 2u);
    EXPECT_EQ(got.logprobs[static_cast<size_t>(i)][0].token, got.tokens[static_cast<size_t>(i)][0]);
  }
  EXPECT_NE(got.tokens[0], got.tokens[1]);
  EXPECT_EQ(handle.stream->usage().completion_tokens, 32);
}

// Every sampled step of a request with penalties carries a penalty list equal to its history (the fake backend
// refuses the batch otherwise), also for parallel samples and under preemption by a full cache.
TEST(Engine, PenaltyListsFollowTheHistory) {
  FakeModelSpec spec = fake_model();
  spec.num_blocks = 36;  // less than the requests need at once: some are preempted and recomputed
  FakeBackend backend(spec);
  Engine engine(backend, engine_options());
  std::vector<GenerationRequest> requests;
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest request = greedy_request(tokens_from(1 + 5 * i, 9 + 2 * i), 20);
    request.sampling.temperature = i % 2 == 0 ? 0.0f : 0.8f;
    request.sampling.repetition_penalty = i % 3 == 0 ? 1.0f : 1.1f;
    request.sampling.presence_penalty = i % 3 == 2 ? 0.0f : 0.5f;
    request.seed = 7;
    request.n = i == 1 ? 2 : 1;
    request.ignore_eos = true;
    requests.push_back(request);
    handles.push_back(engine.submit(request));
  }
  run_until_idle(engine);
  for (size_t i = 0; i < requests.size(); ++i) {
    Collected got = collect(*handles[i].stream, requests[i].n);
    EXPECT_EQ(got.error, "") << "request " << i;
    for (int32_t s = 0; s < requests[i].n; ++s)
      EXPECT_EQ(got.tokens[static_cast<size_t>(s)], reference(requests[i], spec, 7 + static_cast<uint64_t>(s)))
          << "request " << i << " sample " << s;
  }
  EXPECT_GT(engine.stats().scheduler.preemptions, 0u);
  EXPECT_EQ(engine.block_manager().num_free_blocks(), spec.num_blocks);
}

TEST(Engine, StopStringsAcrossTokenBoundaries) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  Engine engine(backend, engine_options(/*with_text=*/true));
  GenerationRequest base = greedy_request(tokens_from(3, 9), 40);
  base.ignore_eos = true;
  std::vector<int32_t> tokens = reference(base, spec);
  std::vector<size_t> piece_end;  // text length after each token
  std::string full_text;
  for (int32_t token : tokens) piece_end.push_back((full_text += fake_piece(token)).size());
  // A stop string starting inside token 5's text and ending inside a later token's.
  size_t start = piece_end[4] + (piece_end[5] - piece_end[4]) / 2;
  std::string stop = full_text.substr(start, 4);
  size_t first = full_text.find(stop);
  size_t stop_end = first + stop.size();
  size_t last_token = 0;
  while (piece_end[last_token] < stop_end) ++last_token;

  GenerationRequest with_stop = base;
  with_stop.stop = {"@never", stop};
  RequestHandle stopped = engine.submit(with_stop);
  GenerationRequest no_match = base;
  no_match.stop = {full_text.substr(full_text.size() - 2) + "@"};  // a prefix is held at the end, then released
  RequestHandle released = engine.submit(no_match);
  run_until_idle(engine);

  Collected got = collect(*stopped.stream, 1);
  EXPECT_EQ(got.text[0], full_text.substr(0, first));
  EXPECT_EQ(got.tokens[0], std::vector<int32_t>(tokens.begin(), tokens.begin() + last_token + 1));
  EXPECT_EQ(got.finish[0], FinishReason::kStop);
  Collected full = collect(*released.stream, 1);
  EXPECT_EQ(full.text[0], full_text);
  EXPECT_EQ(full.finish[0], FinishReason::kLength);
  EXPECT_EQ(engine.block_manager().num_free_blocks(), spec.num_blocks);
}

TEST(Engine, PrefixCacheHitsAreReportedAsCachedTokens) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  Engine engine(backend, engine_options());
  GenerationRequest request = greedy_request(tokens_from(1, 30), 4);
  RequestHandle first = engine.submit(request);
  run_until_idle(engine);
  RequestHandle second = engine.submit(request);
  run_until_idle(engine);
  EXPECT_EQ(first.stream->usage().cached_tokens, 0);
  EXPECT_EQ(second.stream->usage().cached_tokens, 28);  // 7 full blocks; the block with the last token is recomputed
  EXPECT_EQ(collect(*first.stream, 1).tokens, collect(*second.stream, 1).tokens);
  EXPECT_EQ(engine.stats().blocks.prefix_hit_tokens, 28);
}

TEST(Engine, DeadlineEndsTheRequest) {
  FakeBackend backend(fake_model());
  Engine engine(backend, engine_options());
  GenerationRequest request = greedy_request(tokens_from(1, 10), 50);
  request.deadline = Clock::now() - std::chrono::seconds(1);
  RequestHandle handle = engine.submit(request);
  run_until_idle(engine);
  Collected got = collect(*handle.stream, 1);
  EXPECT_EQ(got.finish[0], FinishReason::kDeadline);
  EXPECT_TRUE(got.tokens[0].empty());
}

TEST(Engine, BackendFailureFailsTheBatchAndTheLoopGoesOn) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  Engine engine(backend, engine_options());
  RequestHandle failed = engine.submit(greedy_request(tokens_from(1, 10), 5));
  backend.fail_next_step();
  engine.step();
  Collected got = collect(*failed.stream, 1);
  EXPECT_EQ(got.finish[0], FinishReason::kError);
  EXPECT_NE(got.error.find("injected failure"), std::string::npos);
  EXPECT_EQ(engine.block_manager().num_free_blocks(), spec.num_blocks);
  GenerationRequest next = greedy_request(tokens_from(1, 10), 5);
  RequestHandle ok = engine.submit(next);
  run_until_idle(engine);
  EXPECT_EQ(collect(*ok.stream, 1).tokens[0], reference(next, spec));
}

TEST(Engine, ThrowingCallbackDoesNotStopTheLoop) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  Engine engine(backend, engine_options());
  GenerationRequest rude = greedy_request(tokens_from(1, 10), 5);
  rude.on_output = [] { throw std::runtime_error("callback bug"); };
  GenerationRequest polite = greedy_request(tokens_from(2, 10), 5);
  RequestHandle a = engine.submit(rude);
  RequestHandle b = engine.submit(polite);
  run_until_idle(engine);
  EXPECT_EQ(collect(*a.stream, 1).tokens[0], reference(rude, spec));
  EXPECT_EQ(collect(*b.stream, 1).tokens[0], reference(polite, spec));
}

TEST(Engine, RefusesBadRequestsAtSubmit) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  Engine engine(backend, engine_options());
  auto refusal = [&](const GenerationRequest& request) -> std::string {
    try {
      engine.submit(request);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      return e.what();
    }
    return "accepted";
  };
  GenerationRequest ok = greedy_request(tokens_from(1, 10), 5);
  GenerationRequest r = ok;
  r.prompt.clear();
  EXPECT_NE(refusal(r).find("prompt is empty"), std::string::npos);
  r = ok;
  r.prompt = tokens_from(1, 128);
  EXPECT_NE(refusal(r).find("max_model_len is 128"), std::string::npos);
  r = ok;
  r.prompt[3] = 512;
  EXPECT_NE(refusal(r).find("outside the vocabulary"), std::string::npos);
  r = ok;
  r.max_tokens = 0;
  EXPECT_NE(refusal(r).find("max_tokens must be in [1, 118]"), std::string::npos);
  r = ok;
  r.sampling.temperature = -1.0f;
  EXPECT_NE(refusal(r).find("temperature"), std::string::npos);
  r = ok;
  r.n = 0;
  EXPECT_NE(refusal(r).find("n must be in"), std::string::npos);
  r = ok;
  r.n = kMaxSamplesPerRequest + 1;
  EXPECT_NE(refusal(r).find("n must be in [1, 64]"), std::string::npos);
  r = ok;
  r.n = 40;
  r.max_tokens = 100;
  EXPECT_NE(refusal(r).find("KV blocks at once"), std::string::npos);
  r = ok;
  r.stop = {"x"};
  EXPECT_NE(refusal(r).find("need a tokenizer"), std::string::npos);
  r = ok;
  r.stop_token_ids = {-1};
  EXPECT_NE(refusal(r).find("stop_token_ids"), std::string::npos);
  EXPECT_EQ(refusal(ok), "accepted");
}

// vLLM's rule: a non-zero priority is refused unless the scheduler orders by it, so that it is never ignored.
TEST(Engine, PriorityNeedsThePriorityPolicy) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  GenerationRequest request = greedy_request(tokens_from(1, 10), 5);
  request.priority = 3;
  Engine fcfs(backend, engine_options());
  try {
    fcfs.submit(request);
    ADD_FAILURE() << "priority 3 accepted under fcfs";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).rfind("priority 3 needs --scheduling-policy priority", 0), 0u) << e.what();
  }
  request.priority = 0;
  EXPECT_NO_THROW(fcfs.submit(request));
  FakeBackend other_backend(spec);
  EngineOptions options = engine_options();
  options.policy = SchedulingPolicy::kPriority;
  Engine by_priority(other_backend, options);
  request.priority = -7;
  EXPECT_NO_THROW(by_priority.submit(request));
}

TEST(Engine, RefusesLimitsThatCannotWork) {
  FakeModelSpec spec = fake_model();
  spec.num_blocks = 8;  // 32 tokens, but max_model_len is 128
  FakeBackend backend(spec);
  EXPECT_THROW(Engine(backend, engine_options()), Error);
  EngineOptions options = engine_options();
  options.max_model_len = 32;
  options.enable_chunked_prefill = false;  // needs max_num_batched_tokens >= max_model_len: 32 is fine
  EXPECT_NO_THROW(Engine(backend, options));
  options.max_num_batched_tokens = 16;
  options.max_num_seqs = 4;
  EXPECT_THROW(Engine(backend, options), Error);
}

// --max-input-tokens and --max-logprobs: server limits below what the model allows.
TEST(Engine, RefusesPromptsAndLogprobsBeyondTheServerLimits) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  EngineOptions options = engine_options();
  options.max_prompt_tokens = 20;
  options.max_logprobs = 2;
  Engine engine(backend, options);
  GenerationRequest r = greedy_request(tokens_from(1, 21), 5);
  try {
    engine.submit(r);
    ADD_FAILURE() << "a 21-token prompt was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 20 (max_input_tokens)"), std::string::npos) << e.what();
    EXPECT_EQ(e.field(), "prompt");
  }
  r.prompt = tokens_from(1, 20);
  EXPECT_NO_THROW(engine.submit(r));
  r.logprobs = true;
  r.sampling.num_top_logprobs = 3;
  try {
    engine.submit(r);
    ADD_FAILURE() << "3 top logprobs were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 2 (max_logprobs)"), std::string::npos) << e.what();
    EXPECT_EQ(e.field(), "top_logprobs");
  }
  r.sampling.num_top_logprobs = 2;
  EXPECT_NO_THROW(engine.submit(r));
  run_until_idle(engine);
}

// --seed: requests without a seed draw the same seeds in every engine started with it.
TEST(Engine, EngineSeedMakesUnseededRequestsRepeat) {
  auto sample = [](std::optional<uint64_t> engine_seed) {
    FakeModelSpec spec = fake_model();
    FakeBackend backend(spec);
    EngineOptions options = engine_options();
    options.seed = engine_seed;
    Engine engine(backend, options);
    GenerationRequest r = greedy_request(tokens_from(3, 6), 12);
    r.sampling.temperature = 1.0f;
    r.ignore_eos = true;
    RequestHandle handle = engine.submit(r);
    run_until_idle(engine);
    return collect(*handle.stream, 1).tokens[0];
  };
  EXPECT_EQ(sample(5), sample(5));
  EXPECT_NE(sample(5), sample(6));
}

TEST(Engine, StatsReportTheLastBatchSize) {
  FakeModelSpec spec = fake_model();
  FakeBackend backend(spec);
  Engine engine(backend, engine_options());
  engine.submit(greedy_request(tokens_from(1, 4), 3));
  engine.submit(greedy_request(tokens_from(9, 4), 3));
  ASSERT_TRUE(engine.step());
  EXPECT_EQ(engine.stats().batch_sequences, 2);
  run_until_idle(engine);
  EXPECT_FALSE(engine.step());
  EXPECT_EQ(engine.stats().batch_sequences, 0);
}

}  // namespace
}  // namespace qinfer::testing
