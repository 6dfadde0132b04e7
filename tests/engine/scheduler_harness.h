// Drives a Scheduler + BlockManager over the fake backend the way the engine does, and checks the invariants that
// must hold between steps. Shared by the scheduler unit tests and the property test.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/block_manager.h"
#include "engine/scheduler.h"
#include "testing/fake_backend.h"

namespace qinfer::testing {

struct SequenceSpec {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 16;
  SamplingParams sampling;  // greedy unless a temperature is set
  int32_t priority = 0;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  const Sequence* fork_parent = nullptr;
};

class SchedulerHarness {
 public:
  SchedulerHarness(const FakeModelSpec& spec, SchedulerOptions options, bool enable_prefix_caching);

  Sequence* add(const SequenceSpec& spec);
  // One engine step; returns the batch size (0 when nothing ran). Fails the test on an invariant violation.
  size_t step();
  // Steps until nothing is left; false if that takes more than max_steps.
  bool run_to_completion(int max_steps = 100000);
  // Empty when every invariant holds, else the first violation.
  std::string check_invariants() const;
  // The tokens the fake model must generate for `seq` (which must not have been aborted).
  std::vector<int32_t> reference_output(const Sequence& seq) const;

  FakeModelSpec spec;
  FakeBackend backend;
  BlockManager blocks;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Sequence>> sequences;
  std::vector<SequenceUpdate> updates;  // of the last step
  size_t last_batch_tokens = 0;
  std::vector<size_t> last_batch_order;  // indices into `sequences` of the last batch, in batch order

 private:
  uint64_t next_id_ = 1;
};

// The fake model the scheduler tests drive: a 512-token vocabulary and a KV pool of num_blocks x block_size.
FakeModelSpec fake_model(int32_t num_blocks = 64, int32_t block_size = 4, int32_t max_model_len = 128);

// A prompt of `count` tokens 1 + (first + i) % 500, generating max_tokens with eos ignored.
SequenceSpec numbered_prompt(int32_t first, int32_t count, int32_t max_tokens);

// Every sequence of `harness` finished with the fake model's reference output (gtest expectations).
void expect_reference_outputs(const SchedulerHarness& harness);

}  // namespace qinfer::testing
