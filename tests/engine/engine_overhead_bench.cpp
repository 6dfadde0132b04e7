// Host overhead of one engine step at 256 running sequences: Engine::step() wall time minus the time spent inside
// the backend (the fake backend, so only the engine's own work is left: intake, deadlines, schedule, batch building,
// postprocess, block bookkeeping, detokenizer calls, stop strings, stream pushes). Prints median / p90 / mean.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "engine/engine.h"
#include "testing/fake_backend.h"

namespace qinfer::testing {
namespace {

using BenchClock = std::chrono::steady_clock;

class TimedBackend final : public Backend {
 public:
  explicit TimedBackend(Backend& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  const ModelConfig& config() const override { return inner_.config(); }
  KvCacheShape kv_cache() const override { return inner_.kv_cache(); }
  int max_model_len() const override { return inner_.max_model_len(); }
  std::vector<SampleResult> step(const Batch& batch) override {
    auto start = BenchClock::now();
    std::vector<SampleResult> results = inner_.step(batch);
    seconds += std::chrono::duration<double>(BenchClock::now() - start).count();
    return results;
  }
  std::vector<float> forward_logits(const Batch& batch) override { return inner_.forward_logits(batch); }
  double seconds = 0;

 private:
  Backend& inner_;
};

class ThreeByteDecoder final : public TextDecoder {
 public:
  std::string push(int32_t token) override { return std::string(3, static_cast<char>('a' + token % 26)); }
  std::string flush() override { return {}; }
};

void measure(const char* label, bool with_text) {
  constexpr int kSequences = 256, kPromptLen = 128, kOutputLen = 400, kMeasuredSteps = 300;
  FakeModelSpec spec;
  spec.vocab_size = 151936;
  spec.block_size = 16;
  spec.max_model_len = 2048;
  spec.num_blocks = kSequences * ((kPromptLen + kOutputLen) / spec.block_size + 2);
  FakeBackend fake(spec);
  TimedBackend backend(fake);
  EngineOptions options;
  options.max_num_seqs = kSequences;
  options.max_num_batched_tokens = 8192;
  if (with_text) options.make_text_decoder = [] { return std::make_unique<ThreeByteDecoder>(); };
  Engine engine(backend, options);
  std::mt19937 rng(1);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < kSequences; ++i) {
    GenerationRequest request;
    for (int t = 0; t < kPromptLen; ++t) request.prompt.push_back(static_cast<int32_t>(rng() % 151000));
    request.max_tokens = kOutputLen;
    request.ignore_eos = true;
    request.sampling.temperature = 0.7f;
    if (with_text) request.stop = {"never-appears", "#end"};  // the decoder writes only lowercase letters
    handles.push_back(engine.submit(request));
  }
  // Until every sequence decodes: 256 x 128 prompt tokens take 4 steps of 8192.
  for (int i = 0; i < 8; ++i) engine.step();
  std::vector<double> overhead_us;
  std::vector<StreamDelta> drained;
  for (int i = 0; i < kMeasuredSteps; ++i) {
    double backend_before = backend.seconds;
    auto start = BenchClock::now();
    engine.step();
    double total = std::chrono::duration<double>(BenchClock::now() - start).count();
    overhead_us.push_back((total - (backend.seconds - backend_before)) * 1e6);
    for (RequestHandle& handle : handles) handle.stream->wait_drain(drained, std::chrono::milliseconds(0));
    drained.clear();
  }
  EngineStats stats = engine.stats();
  std::sort(overhead_us.begin(), overhead_us.end());
  double mean = 0;
  for (double us : overhead_us) mean += us / static_cast<double>(overhead_us.size());
  std::printf("%-28s running %d: overhead per step median %.1f us, p90 %.1f us, mean %.1f us\n", label,
              stats.num_running, overhead_us[overhead_us.size() / 2], overhead_us[overhead_us.size() * 9 / 10], mean);
}

}  // namespace
}  // namespace qinfer::testing

int main() {
  qinfer::testing::measure("token ids only", false);
  qinfer::testing::measure("text + 2 stop strings", true);
  return 0;
}
