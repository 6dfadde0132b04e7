// Helpers of the engine tests over the fake backend: a small fake model, engine options, requests, and what a
// request streamed.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "testing/fake_backend.h"

namespace qinfer::testing {

// Text of a fake token: one or two letters, so that stop strings cross token boundaries.
inline std::string fake_piece(int32_t token) {
  std::string piece(1, static_cast<char>('a' + token % 26));
  if (token % 3 == 0) piece += static_cast<char>('a' + (token / 26) % 26);
  return piece;
}

class FakeTextDecoder final : public TextDecoder {
 public:
  std::string push(int32_t token) override { return fake_piece(token); }
  std::string flush() override { return {}; }
};

inline FakeModelSpec fake_model() {
  FakeModelSpec spec;
  spec.vocab_size = 512;
  spec.num_blocks = 64;
  spec.block_size = 4;
  spec.max_model_len = 128;
  return spec;
}

inline EngineOptions engine_options(bool with_text = false) {
  EngineOptions options;
  options.max_num_seqs = 8;
  options.max_num_batched_tokens = 32;
  if (with_text) options.make_text_decoder = [] { return std::make_unique<FakeTextDecoder>(); };
  return options;
}

inline std::vector<int32_t> tokens_from(int32_t first, int32_t count) {
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

inline GenerationRequest greedy_request(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest request;
  request.prompt = std::move(prompt);
  request.sampling.temperature = 0.0f;
  request.max_tokens = max_tokens;
  return request;
}

inline void run_until_idle(Engine& engine) {
  while (engine.step() || engine.has_work()) {
  }
}

// Everything a request streamed, per sample.
struct Collected {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> text;
  std::vector<FinishReason> finish;
  std::vector<std::vector<TokenLogprobs>> logprobs;
  std::string error;
};

inline Collected collect(RequestStream& stream, int32_t n) {
  Collected out;
  out.tokens.resize(static_cast<size_t>(n));
  out.text.resize(static_cast<size_t>(n));
  out.finish.assign(static_cast<size_t>(n), FinishReason::kNone);
  out.logprobs.resize(static_cast<size_t>(n));
  std::vector<StreamDelta> deltas;
  while (stream.wait_drain(deltas, std::chrono::milliseconds(10000))) {
    for (StreamDelta& delta : deltas) {
      size_t i = static_cast<size_t>(delta.index);
      EXPECT_EQ(out.finish[i], FinishReason::kNone) << "delta after the finish";
      out.tokens[i].insert(out.tokens[i].end(), delta.token_ids.begin(), delta.token_ids.end());
      out.text[i] += delta.text;
      out.logprobs[i].insert(out.logprobs[i].end(), delta.logprobs.begin(), delta.logprobs.end());
      if (delta.finish_reason != FinishReason::kNone) out.finish[i] = delta.finish_reason;
      if (!delta.error.empty()) out.error = delta.error;
    }
    deltas.clear();
  }
  return out;
}

}  // namespace qinfer::testing
